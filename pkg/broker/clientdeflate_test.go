package broker

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/wire"
)

// The Go client (pkg/wire, so tail, publish and relays) against a real
// server that compresses with context takeover: it negotiates it, reads
// compressed frames, and decodes exactly the rows a plain client does.

// readCountingConn counts the bytes read from its socket.
type readCountingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c readCountingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// goSub is a wire.Subscription whose socket's bytes are counted.
type goSub struct {
	*wire.Subscription
	read atomic.Int64
}

// subscribeGo subscribes with the Go client, offering permessage-deflate
// or not, through a dialer that counts the bytes read from the socket
// (under TLS, when tc is set).
func subscribeGo(t testing.TB, url string, compress bool, tc *tls.Config, opts wire.SubscribeOptions) *goSub {
	t.Helper()
	s := &goSub{}
	opts.TLS = tc
	opts.Dialer = &websocket.Dialer{
		HandshakeTimeout:  10 * time.Second,
		ReadBufferSize:    64 << 10,
		WriteBufferSize:   4 << 10,
		EnableCompression: compress,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return readCountingConn{c, &s.read}, nil
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub, err := wire.Subscribe(ctx, url, opts)
	if err != nil {
		t.Fatalf("subscribe %s: %v", url, err)
	}
	t.Cleanup(func() { sub.Close() })
	s.Subscription = sub
	return s
}

// frames reads n data frames and returns them with their offsets.
func (s *goSub) frames(t testing.TB, n int) ([]string, []int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var frames []string
	var offsets []int64
	for len(frames) < n {
		m, err := s.Recv(ctx)
		if err != nil {
			t.Fatalf("after %d frames of %d: %v", len(frames), n, err)
		}
		frames = append(frames, string(m.Frame()))
		offsets = append(offsets, m.Offset)
	}
	return frames, offsets
}

// subscriberModes counts the server's subscriber connections by the
// permessage-deflate they negotiated.
func subscriberModes(srv *Server) map[deflateMode]int {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	modes := map[deflateMode]int{}
	for c := range srv.conns {
		if c.pub == nil {
			modes[c.deflate]++
		}
	}
	return modes
}

// TestTheGoClientDecodesCompressedFramesAsPlainOnesArrive runs Go clients
// that negotiated context takeover beside plain ones with the same
// requests: one there from the start, one with a where= filter, one that
// joins while rows flow (plain frames until its group resets, compressed
// after) and a replay from offset 1. Each decodes exactly the frames of
// its plain twin, and the compressing ones read under half the bytes.
func TestTheGoClientDecodesCompressedFramesAsPlainOnesArrive(t *testing.T) {
	srv := startServer(t, compressionConfig(t))
	url := wsURL(srv, "/trades")
	publishTrades(t, srv, "trades", 0, 50, 10) // offsets 1..50 before anyone subscribes

	eth := wire.SubscribeOptions{Where: json.RawMessage(`{"symbol":"ETH-USD"}`)}
	plain := subscribeGo(t, url, false, nil, wire.SubscribeOptions{})
	z := subscribeGo(t, url, true, nil, wire.SubscribeOptions{})
	plainW := subscribeGo(t, url, false, nil, eth)
	zW := subscribeGo(t, url, true, nil, eth)
	if m := subscriberModes(srv); m[deflateContext] != 2 || m[deflateOff] != 2 {
		t.Fatalf("subscribers negotiated %v; want 2 with context takeover (%d), 2 without the extension (%d)", m, deflateContext, deflateOff)
	}

	type joined struct {
		s   *goSub
		err error
	}
	late := make(chan joined, 1)
	go func() {
		// Subscribe returns once the server greeted it, so it is
		// attached; the rows published after that reach it.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s := &goSub{}
		sub, err := wire.Subscribe(ctx, url, wire.SubscribeOptions{})
		s.Subscription = sub
		late <- joined{s, err}
	}()
	publishTrades(t, srv, "trades", 50, 300, 3)
	j := <-late
	if j.err != nil {
		t.Fatal(j.err)
	}
	t.Cleanup(func() { j.s.Close() })
	publishTrades(t, srv, "trades", 350, 300, 3)

	want, offsets := plain.frames(t, 600)
	got, _ := z.frames(t, 600)
	if d := firstDiff(want, got); d != "" {
		t.Fatalf("from the start: %s", d)
	}
	t.Logf("live: %d bytes read compressed, %d plain", z.read.Load(), plain.read.Load())
	if z.read.Load()*2 > plain.read.Load() {
		t.Errorf("the compressing client read %d bytes, the plain one %d", z.read.Load(), plain.read.Load())
	}
	if d := firstDiff(plainW.mustFrames(t, 150), zW.mustFrames(t, 150)); d != "" {
		t.Fatalf("where=: %s", d)
	}

	// The late client starts at the frontier it was greeted with.
	from := j.s.Greeting().EndOffset
	i := 0
	for i < len(offsets) && offsets[i] < from {
		i++
	}
	if d := firstDiff(want[i:], j.s.mustFrames(t, len(want)-i)); d != "" {
		t.Fatalf("joined at offset %d: %s", from, d)
	}

	plainR := subscribeGo(t, url, false, nil, wire.SubscribeOptions{Offset: wire.At(1)})
	zR := subscribeGo(t, url, true, nil, wire.SubscribeOptions{Offset: wire.At(1)})
	wantR, _ := plainR.frames(t, 650)
	if d := firstDiff(wantR, zR.mustFrames(t, 650)); d != "" {
		t.Fatalf("replay: %s", d)
	}
	t.Logf("replay: %d bytes read compressed, %d plain", zR.read.Load(), plainR.read.Load())
	if zR.read.Load()*2 > plainR.read.Load() {
		t.Errorf("the compressing replay read %d bytes, the plain one %d", zR.read.Load(), plainR.read.Load())
	}
}

func (s *goSub) mustFrames(t testing.TB, n int) []string {
	t.Helper()
	f, _ := s.frames(t, n)
	return f
}

// TestTheGoClientInflatesOverTLS: over wss the inflating connection sits
// above TLS (it reads what TLS decrypted), and the rows are the plain
// client's.
func TestTheGoClientInflatesOverTLS(t *testing.T) {
	f := newTLSFixture(t)
	srv := startServer(t, f.cfg)
	url := wssURL(srv, "/trades")
	publishGo(t, url, f.client(), 200)
	plain := subscribeGo(t, url, false, f.client(), wire.SubscribeOptions{Offset: wire.At(1)})
	z := subscribeGo(t, url, true, f.client(), wire.SubscribeOptions{Offset: wire.At(1)})
	if m := subscriberModes(srv); m[deflateContext] != 1 {
		t.Fatalf("subscribers negotiated %v; want one with context takeover (%d)", m, deflateContext)
	}
	want, _ := plain.frames(t, 200)
	if d := firstDiff(want, z.mustFrames(t, 200)); d != "" {
		t.Fatal(d)
	}
	if z.read.Load()*2 > plain.read.Load() {
		t.Errorf("the compressing client read %d bytes, the plain one %d", z.read.Load(), plain.read.Load())
	}
}

// TestTheGoClientReadsAServerWithoutCompression: compression: false
// answers no extension, and the client reads plain frames as before.
func TestTheGoClientReadsAServerWithoutCompression(t *testing.T) {
	cfg := compressionConfig(t)
	cfg.Compression = false
	srv := startServer(t, cfg)
	publishTrades(t, srv, "trades", 0, 100, 10)
	url := wsURL(srv, "/trades")
	plain := subscribeGo(t, url, false, nil, wire.SubscribeOptions{Offset: wire.At(1)})
	z := subscribeGo(t, url, true, nil, wire.SubscribeOptions{Offset: wire.At(1)})
	if m := subscriberModes(srv); m[deflateOff] != 2 {
		t.Fatalf("subscribers negotiated %v; want none (%d)", m, deflateOff)
	}
	want, _ := plain.frames(t, 100)
	if d := firstDiff(want, z.mustFrames(t, 100)); d != "" {
		t.Fatal(d)
	}
}

// TestARelayReceivesCompressedFramesFromItsUpstream: a relay's
// subscription to its upstream negotiates context takeover, the upstream
// sends it under half the bytes of the plain frames, and the relay serves
// the origin's frames byte for byte, live and replayed.
func TestARelayReceivesCompressedFramesFromItsUpstream(t *testing.T) {
	origin := startNode(t, originConfig(t))
	up := wsURL(origin, "/trades")
	relay := startRelay(t, relayConfig(t, up, true))
	if m := subscriberModes(origin); m[deflateContext] != 1 {
		t.Fatalf("the origin's subscribers negotiated %v; want the relay's with context takeover (%d)", m, deflateContext)
	}
	live := collect(t, wsURL(relay, "/trades"))
	waitFor(t, "the relay mirroring", 20*time.Second, func() bool {
		r := streamStats(relay, "trades").Relay
		return r != nil && r.State == relayMirroring
	})
	const rows = 2000
	publishRows(t, up, 0, rows)
	waitFor(t, "the relay mirroring every row", 20*time.Second, func() bool {
		return streamStats(relay, "trades").Relay.RowsMirrored == rows
	})
	sent := streamStats(origin, "trades").BytesSent // to the relay, and the publisher's replies

	ref := collect(t, up+"?offset=0")
	ref.waitLen(t, "the origin's subscriber", rows)
	want := ref.snapshot()
	plainBytes := 0
	for _, f := range want {
		plainBytes += len(wire.TextFrame(f))
	}
	t.Logf("the origin sent %d bytes to the relay for %d bytes of plain frames", sent, plainBytes)
	if sent*2 > int64(plainBytes) {
		t.Errorf("the origin sent %d bytes to the relay for %d bytes of plain frames", sent, plainBytes)
	}
	live.waitLen(t, "the relay's live subscriber", rows)
	sameFrames(t, "the relay's live subscriber", live.snapshot(), want)
	replay := collect(t, wsURL(relay, "/trades?offset=0"))
	replay.waitLen(t, "the relay's replay", rows)
	sameFrames(t, "the relay's replay", replay.snapshot(), want)
}

// publishGo publishes n trades rows to url with the Go client, acknowledged.
func publishGo(t testing.TB, url string, tc *tls.Config, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pub, err := wire.Publish(ctx, url, wire.PublishOptions{DialOptions: wire.DialOptions{TLS: tc}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	sym := []string{"BTC-USD", "ETH-USD", "SOL-USD", "AAPL"}
	var rows [][]byte
	for j := range n {
		rows = append(rows, fmt.Appendf(nil, `{"event_ts":%d,"symbol":%q,"price":%d.%02d,"amount":%d.5,"side":%d}`, 1733480000000+j*7, sym[j%4], 100+j%97, j%100, j%13, j%2))
	}
	a, err := pub.SubmitBatch(ctx, rows)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkGoSubscriberReplay replays 20,000 trades rows from a real
// server to one Go client, plain and with context takeover (the server
// compresses the replay with a compressor of its own, the client
// inflates): rows/s, and the bytes read from the socket per row.
func BenchmarkGoSubscriberReplay(b *testing.B) {
	const rows = 20000
	srv := startServer(b, compressionConfig(b))
	publishTrades(b, srv, "trades", 0, rows, 100)
	url := wsURL(srv, "/trades")
	for _, compress := range []bool{false, true} {
		name := "plain"
		if compress {
			name = "takeover"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			var read int64
			for range b.N {
				s := subscribeGo(b, url, compress, nil, wire.SubscribeOptions{Offset: wire.At(1)})
				for i := range rows {
					if _, err := s.Recv(ctx); err != nil {
						b.Fatalf("row %d: %v", i, err)
					}
				}
				read += s.read.Load()
				s.Close()
			}
			b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(read)/float64(b.N*rows), "B/row")
		})
	}
}

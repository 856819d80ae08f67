package broker

import (
	"bufio"
	"bytes"
	"compress/flate"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// rawClient is a WebSocket client written for these tests (not
// gorilla's): it offers permessage-deflate as a browser does (context
// takeover both ways) and inflates with history, as RFC 7692 says a
// receiver does. It inflates with pkg/wire's Inflater, streamcast's own,
// so it cannot catch a mistake the two sides share; nodews_test.go reads
// the same streams with node's ws, and pkg/broker/console's
// TestChromiumDecodesCompressedFramesAsPlainOnes with Chromium.
type rawClient struct {
	t    testing.TB
	nc   net.Conn
	br   *bufio.Reader
	ext  string // the Sec-WebSocket-Extensions the server answered
	inf  wire.Inflater
	zmsg int // compressed messages read
	raw  int // bytes of data frames read (headers included)
}

// dialDeflate opens path on srv offering ext ("" offers nothing).
func dialDeflate(t testing.TB, srv *Server, path, ext string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	req := "GET " + path + " HTTP/1.1\r\nHost: " + srv.Addr().String() +
		"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " +
		base64.StdEncoding.EncodeToString(key) + "\r\n"
	if ext != "" {
		req += "Sec-WebSocket-Extensions: " + ext + "\r\n"
	}
	if _, err := io.WriteString(nc, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	c := &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %s", resp.Status)
	}
	c.ext = resp.Header.Get("Sec-WebSocket-Extensions")
	_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	return c
}

// next returns the next message (inflated when compressed) and whether it
// was a data message; a close frame returns its payload and false.
func (c *rawClient) next() ([]byte, bool) {
	c.t.Helper()
	var msg []byte
	compressed := false
	for first := true; ; first = false {
		var h [2]byte
		if _, err := io.ReadFull(c.br, h[:]); err != nil {
			c.t.Fatalf("read a frame after %d bytes: %v", c.raw, err)
		}
		n := uint64(h[1] & 0x7f)
		hn := 2
		switch n {
		case 126:
			var b [2]byte
			_, _ = io.ReadFull(c.br, b[:])
			n, hn = uint64(binary.BigEndian.Uint16(b[:])), 4
		case 127:
			var b [8]byte
			_, _ = io.ReadFull(c.br, b[:])
			n, hn = binary.BigEndian.Uint64(b[:]), 10
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(c.br, p); err != nil {
			c.t.Fatalf("read a payload: %v", err)
		}
		op := h[0] & 0x0f
		if op >= 0x8 {
			if op == 0x8 {
				return p, false
			}
			continue // ping, pong
		}
		if first {
			compressed = h[0]&0x40 != 0
		}
		c.raw += hn + int(n)
		msg = append(msg, p...)
		if h[0]&0x80 != 0 {
			break
		}
	}
	if !compressed {
		return msg, true
	}
	c.zmsg++
	out, err := c.inf.Inflate(msg, 0)
	if err != nil {
		c.t.Fatalf("message %d: %v", c.zmsg, err)
	}
	return bytes.Clone(out), true
}

// greeting reads the greeting.
func (c *rawClient) greeting() []byte {
	c.t.Helper()
	g, ok := c.next()
	if !ok {
		c.t.Fatalf("closed instead of greeting: %q", g)
	}
	return g
}

// rows reads n data messages.
func (c *rawClient) rows(n int) (rows []string) {
	c.t.Helper()
	for len(rows) < n {
		m, ok := c.next()
		if !ok {
			c.t.Fatalf("closed after %d rows of %d: %q", len(rows), n, m)
		}
		rows = append(rows, string(m))
	}
	return rows
}

// browserOffer is what Chromium and node's ws offer.
const browserOffer = "permessage-deflate; client_max_window_bits"

func compressionConfig(t testing.TB) config.Config {
	cfg := testConfig(t)
	return cfg
}

// publishTrades publishes n trades rows to stream st in batches of batch.
func publishTrades(t testing.TB, srv *Server, st string, from, n, batch int) {
	t.Helper()
	ws, _ := mustDial(t, wsURL(srv, "/"+st+"?publish"))
	defer ws.Close()
	sym := []string{"BTC-USD", "ETH-USD", "SOL-USD", "AAPL"}
	sent := 0
	for i := from; i < from+n; i += batch {
		var b strings.Builder
		b.WriteByte('[')
		for j := i; j < min(i+batch, from+n); j++ {
			if j > i {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"event_ts":%d,"symbol":%q,"price":%d.%02d,"amount":%d.5,"side":%d}`, 1733480000000+j*7, sym[j%4], 100+j%97, j%100, j%13, j%2)
		}
		b.WriteByte(']')
		if err := ws.WriteMessage(websocket.TextMessage, []byte(b.String())); err != nil {
			t.Fatal(err)
		}
		sent++
	}
	for k := 0; k < sent; k++ {
		_, m, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("publish reply: %v", err)
		}
		if !bytes.Contains(m, []byte(`"ok"`)) {
			t.Fatalf("publish reply: %s", m)
		}
	}
}

func TestCompressionIsNegotiatedOnlyWhenOffered(t *testing.T) {
	srv := startServer(t, compressionConfig(t))
	for _, tc := range []struct{ offer, want string }{
		{"", ""},
		{browserOffer, "permessage-deflate; client_no_context_takeover"},
		{"permessage-deflate; server_no_context_takeover; client_no_context_takeover", "permessage-deflate; server_no_context_takeover; client_no_context_takeover"},
		{"permessage-deflate; server_max_window_bits=10", "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10"},
		{"x-webkit-deflate-frame", ""},
		{"permessage-deflate; mystery", ""},
	} {
		c := dialDeflate(t, srv, "/trades?offset=1", tc.offer)
		if c.ext != tc.want {
			t.Errorf("offer %q: answered %q, want %q", tc.offer, c.ext, tc.want)
		}
	}
	cfg := compressionConfig(t)
	cfg.Compression = false
	off := startServer(t, cfg)
	if c := dialDeflate(t, off, "/trades", browserOffer); c.ext != "" {
		t.Errorf("compression: false answered %q", c.ext)
	}
}

// TestCompressingSubscribersDecodeWhatPlainOnesGet runs compressing
// subscribers beside a plain one: one there from the start, one that joins
// while rows flow (it waits for its group's reset), one that replays from
// offset 1 and one that filters; each must decode exactly the rows the
// plain subscriber with the same request receives, and live frames must be
// compressed.
func TestCompressingSubscribersDecodeWhatPlainOnesGet(t *testing.T) {
	for _, perConn := range []bool{false, true} {
		t.Run(fmt.Sprintf("perConn=%v", perConn), func(t *testing.T) {
			srv := startServer(t, compressionConfig(t), Options{deflatePerConn: perConn})
			publishTrades(t, srv, "trades", 0, 50, 10) // offsets 1..50 before anyone subscribes

			plain := dialDeflate(t, srv, "/trades", "")
			early := dialDeflate(t, srv, "/trades", browserOffer)
			where := `?where=` + urlEscape(`{"symbol":"ETH-USD"}`)
			plainWhere := dialDeflate(t, srv, "/trades"+where, "")
			zWhere := dialDeflate(t, srv, "/trades"+where, browserOffer)
			// early and zWhere must be attached before the rows below.
			plain.greeting()
			early.greeting()
			plainWhere.greeting()
			zWhere.greeting()
			publishTrades(t, srv, "trades", 50, 300, 7)
			late := dialDeflate(t, srv, "/trades", browserOffer)
			late.greeting()
			replay := dialDeflate(t, srv, "/trades?offset=1", browserOffer)
			publishTrades(t, srv, "trades", 350, 300, 3)

			want := plain.rows(600)
			got := early.rows(600)
			if d := firstDiff(want, got); d != "" {
				t.Fatalf("early: %s", d)
			}
			if early.zmsg < 500 {
				t.Errorf("early: %d of 600 rows were compressed", early.zmsg)
			}
			if early.raw*2 > plain.raw {
				t.Errorf("early read %d bytes, the plain subscriber %d", early.raw, plain.raw)
			}
			got = late.rows(300)
			if d := firstDiff(want[300:], got); d != "" {
				t.Fatalf("late: %s", d)
			}
			if late.zmsg == 0 {
				t.Errorf("late: no row was compressed")
			}
			replay.greeting()
			got = replay.rows(650)
			full := dialDeflate(t, srv, "/trades?offset=1", "")
			full.greeting()
			wantAll := full.rows(650)
			if d := firstDiff(wantAll, got); d != "" {
				t.Fatalf("replay: %s", d)
			}
			if replay.zmsg < 600 {
				t.Errorf("replay: %d of 650 rows were compressed", replay.zmsg)
			}
			wantW := plainWhere.rows(150)
			gotW := zWhere.rows(150)
			if d := firstDiff(wantW, gotW); d != "" {
				t.Fatalf("where=: %s", d)
			}
		})
	}
}

func firstDiff(want, got []string) string {
	for i := range min(len(want), len(got)) {
		if want[i] != got[i] {
			return fmt.Sprintf("row %d: got %s, want %s", i, got[i], want[i])
		}
	}
	if len(want) != len(got) {
		return fmt.Sprintf("%d rows, want %d", len(got), len(want))
	}
	return ""
}

func urlEscape(s string) string {
	return strings.NewReplacer("{", "%7B", "}", "%7D", `"`, "%22", ":", "%3A", " ", "%20").Replace(s)
}

// TestACompressedPublishIsLimitedByItsInflatedSize sends a 64 MiB run of
// spaces compressed to about 64 KiB: max_message_bytes (1 MiB) applies to
// what it inflates to, so the publisher is closed with 1009, and the
// server never allocates the 64 MiB.
func TestACompressedPublishIsLimitedByItsInflatedSize(t *testing.T) {
	srv := startServer(t, compressionConfig(t))
	var z bytes.Buffer
	fw, _ := flate.NewWriter(&z, flate.BestCompression)
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	for range 64 {
		_, _ = fw.Write(chunk)
	}
	_ = fw.Flush()
	bomb := bytes.TrimSuffix(z.Bytes(), []byte{0, 0, 0xff, 0xff})
	c := dialDeflate(t, srv, "/trades?publish", "permessage-deflate; client_no_context_takeover")
	if !strings.Contains(c.ext, "permessage-deflate") {
		t.Fatalf("not negotiated: %q", c.ext)
	}
	c.next() // greeting
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c.send(bomb, true)
	code, reason := 0, ""
	for {
		m, ok := c.next()
		if !ok {
			if len(m) >= 2 {
				code, reason = int(binary.BigEndian.Uint16(m)), string(m[2:])
			}
			break
		}
	}
	runtime.ReadMemStats(&after)
	if code != wire.CloseTooBig {
		t.Fatalf("closed %d %s, want %d", code, reason, wire.CloseTooBig)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("the refusal allocated %d MiB", grew>>20)
	}
	// A compressed row within the limit is taken.
	c2 := dialDeflate(t, srv, "/trades?publish", "permessage-deflate; client_no_context_takeover")
	c2.next()
	var zr bytes.Buffer
	fw.Reset(&zr)
	_, _ = fw.Write([]byte(`{"event_ts":1,"symbol":"X","price":1.5,"amount":2,"side":1}`))
	_ = fw.Flush()
	c2.send(bytes.TrimSuffix(zr.Bytes(), []byte{0, 0, 0xff, 0xff}), true)
	if m, ok := c2.next(); !ok || !bytes.Contains(m, []byte(`"ok"`)) {
		t.Fatalf("a compressed row: %s", m)
	}
}

// send writes one masked text message, compressed (RSV1) or not.
func (c *rawClient) send(p []byte, compressed bool) {
	c.t.Helper()
	b0 := byte(0x81)
	if compressed {
		b0 |= 0x40
	}
	hdr := []byte{b0}
	switch n := len(p); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n < 1<<16:
		hdr = append(hdr, 0x80|126, byte(n>>8), byte(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	mask := []byte{1, 2, 3, 4}
	hdr = append(hdr, mask...)
	masked := make([]byte, len(p))
	for i := range p {
		masked[i] = p[i] ^ mask[i%4]
	}
	if _, err := c.nc.Write(append(hdr, masked...)); err != nil {
		c.t.Fatal(err)
	}
}

// TestACompressingSubscriberDroppedFor4429ResumesExactly stalls one
// compressing subscriber of a group past max_backlog: it decodes a
// contiguous prefix, then 4429 names the offset to resume at, and a
// compressing resume from there decodes the rest; the group's other
// member, which kept reading, decodes every row meanwhile.
func TestACompressingSubscriberDroppedFor4429ResumesExactly(t *testing.T) {
	const maxBacklog = 64
	cfg := compressionConfig(t)
	cfg.Limits.MaxBacklog = maxBacklog
	release := make(chan struct{})
	var slowAddr atomic.Value
	slowAddr.Store("")
	srv := startServerWith(t, cfg, Options{}, func(s *Server) {
		s.opts.writeHook = func(c *wsConn, n int, _ bool) {
			if c.nc.RemoteAddr().String() == slowAddr.Load().(string) {
				<-release
			}
		}
	})
	plain := dialDeflate(t, srv, "/trades", "")
	slow := dialDeflate(t, srv, "/trades", browserOffer)
	fast := dialDeflate(t, srv, "/trades", browserOffer)
	plain.greeting()
	slow.greeting()
	fast.greeting()
	slowAddr.Store(slow.nc.LocalAddr().String())
	for i := 0; i < 200; i += 10 {
		// A batch at a time, so only the stalled subscriber falls behind.
		publishTrades(t, srv, "trades", i, 10, 10)
	}
	close(release)
	want := plain.rows(200)
	if d := firstDiff(want, fast.rows(200)); d != "" {
		t.Fatalf("the member that kept reading: %s", d)
	}
	var got []string
	var closeMsg []byte
	for {
		m, ok := slow.next()
		if !ok {
			closeMsg = m
			break
		}
		got = append(got, string(m))
	}
	if code := int(binary.BigEndian.Uint16(closeMsg)); code != wire.CloseTooSlow {
		t.Fatalf("closed %d %s, want 4429", code, closeMsg[2:])
	}
	if d := firstDiff(want[:len(got)], got); d != "" || len(got) == 0 || len(got) > maxBacklog+5 {
		t.Fatalf("prefix of %d rows: %s", len(got), d)
	}
	var ts wire.TooSlow
	if err := json.Unmarshal(closeMsg[2:], &ts); err != nil {
		t.Fatalf("4429 reason %q: %v", closeMsg[2:], err)
	}
	resume := dialDeflate(t, srv, fmt.Sprintf("/trades?offset=%d", ts.Offset), browserOffer)
	resume.greeting()
	if d := firstDiff(want[len(got):], resume.rows(200-len(got))); d != "" {
		t.Fatalf("resumed at %d: %s", ts.Offset, d)
	}
	if resume.zmsg == 0 {
		t.Error("the resumed replay was not compressed")
	}
}

// TestTheGoClientNegotiatesCompression: the Go client (tail, publish, the
// relay) offers permessage-deflate with server context takeover; its
// batches arrive compressed and commit, a publisher is answered plain,
// and as a subscriber it reads the compressed frames the server sends.
func TestTheGoClientNegotiatesCompression(t *testing.T) {
	srv := startServer(t, compressionConfig(t))
	ctx := context.Background()
	on := wire.DialOptions{Compression: wire.CompressOn} // the server is on loopback
	sub, err := wire.Subscribe(ctx, wsURL(srv, "/trades"), wire.SubscribeOptions{DialOptions: on})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	pub, err := wire.Publish(ctx, wsURL(srv, "/trades"), wire.PublishOptions{DialOptions: on})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	modes := map[bool]deflateMode{}
	srv.mu.Lock()
	for c := range srv.conns {
		modes[c.pub != nil] = c.deflate
	}
	srv.mu.Unlock()
	if modes[true] != deflatePlain || modes[false] != deflateContext {
		t.Fatalf("publisher negotiated %d, subscriber %d; want deflatePlain (%d) and deflateContext (%d)", modes[true], modes[false], deflatePlain, deflateContext)
	}
	var rows [][]byte
	for i := range 100 {
		rows = append(rows, fmt.Appendf(nil, `{"event_ts":%d,"symbol":"BTC-USD","price":1.5,"amount":2.0,"side":1,"trade_id":null}`, i)) // canonical, as delivered
	}
	a, err := pub.SubmitBatch(ctx, rows)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		m, err := sub.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Row) != string(rows[i]) {
			t.Fatalf("row %d: %s, want %s", i, m.Row, rows[i])
		}
	}
}

// TestSubscribersPastTheCompressorBudgetGetPlainFrames: with
// limits.max_compression_bytes room for one compressor, the group that
// has it compresses; a replay and a group with another filter get plain
// frames with every row intact (never a refusal), counted in /metrics;
// when the first group's subscribers leave, the waiting group takes the
// compressor at its next delivery.
func TestSubscribersPastTheCompressorBudgetGetPlainFrames(t *testing.T) {
	cfg := compressionConfig(t)
	cfg.Limits.MaxCompressionBytes = wire.DeflaterBytes
	srv := startServer(t, cfg)
	publishTrades(t, srv, "trades", 0, 100, 10)
	plain := dialDeflate(t, srv, "/trades?offset=1", "")
	plain.greeting()
	want := plain.rows(100)

	first := dialDeflate(t, srv, "/trades", browserOffer)
	first.greeting()
	where := "/trades?where=" + urlEscape(`{"symbol":"ETH-USD"}`)
	plainWhere := dialDeflate(t, srv, where, "")
	other := dialDeflate(t, srv, where, browserOffer)
	plainWhere.greeting()
	other.greeting()
	publishTrades(t, srv, "trades", 100, 100, 10)
	if d := firstDiff(plain.rows(100), first.rows(100)); d != "" {
		t.Fatalf("the group with the compressor: %s", d)
	}
	if first.zmsg == 0 {
		t.Fatal("the group with the budget's one compressor sent no compressed row")
	}
	wantWhere := plainWhere.rows(25)
	if d := firstDiff(wantWhere, other.rows(25)); d != "" {
		t.Fatalf("the group past the budget: %s", d)
	}
	if other.zmsg != 0 {
		t.Errorf("the group past the budget got %d compressed rows", other.zmsg)
	}

	replay := dialDeflate(t, srv, "/trades?offset=1", browserOffer)
	replay.greeting()
	if d := firstDiff(want, replay.rows(100)); d != "" {
		t.Fatalf("the replay past the budget: %s", d)
	}
	if replay.zmsg != 0 {
		t.Errorf("the replay past the budget got %d compressed rows", replay.zmsg)
	}
	fams := scrape(t, srv)
	if got := metricValue(t, fams, "streamcast_compression_bytes"); got != wire.DeflaterBytes {
		t.Errorf("streamcast_compression_bytes %v, want one compressor's %d", got, wire.DeflaterBytes)
	}
	if got := metricValue(t, fams, "streamcast_compression_deferred_total"); got != 2 {
		t.Errorf("streamcast_compression_deferred_total %v, want 2 (the filtered group, the replay)", got)
	}

	// Caught up, the replay waits to join the first group; the server lets
	// that group's compressor go when it sees both close.
	first.nc.Close()
	replay.nc.Close()
	for deadline := time.Now().Add(10 * time.Second); srv.deflaters.held.Load() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the compressor of a group whose subscribers left is still held after 10 s")
		}
	}
	publishTrades(t, srv, "trades", 200, 40, 1)
	if d := firstDiff(plainWhere.rows(10), other.rows(10)); d != "" {
		t.Fatalf("after the compressor came free: %s", d)
	}
	if other.zmsg == 0 {
		t.Error("the waiting group did not take the compressor that came free")
	}
}

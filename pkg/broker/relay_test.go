package broker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit"
	relaypkg "github.com/streamcast/streamcast/pkg/broker/relay"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// The follower's states, as /stats reports them (the tests' variables
// are often named relay).
const (
	relayConnecting = relaypkg.Connecting
	relayMirroring  = relaypkg.Mirroring
	relayStopped    = relaypkg.Stopped
)

// originConfig serves one durable "trades" stream (DemoSchema) with
// unbounded replay.
func originConfig(t testing.TB) config.Config {
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1]
	cfg.Streams[0].MaxReplay = nil
	cfg.Limits.MaxBacklog = 1 << 20
	return cfg
}

// relayConfig serves "trades" as a relay of upstream (a ws:// stream URL).
func relayConfig(t testing.TB, upstream string, durable bool) config.Config {
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Root = t.TempDir()
	cfg.Maintain.Enabled = false
	cfg.Limits.MaxBacklog = 1 << 20
	cfg.Streams = []config.Stream{{Name: "trades", Durable: durable, GroupCommit: true, Upstream: upstream}}
	return cfg
}

// startNode starts one server of a relay test. Several servers run at once
// here, and each starts goroutines after it is ready (a committer's
// deliverer, a relay's subscription and the upstream's connection for it),
// so one server's goroutines could land after another's leak baseline:
// the per-server check (startServerWith) is skipped by passing a plain
// testing.TB, and TestMain's check over the whole binary stands instead.
func startNode(t testing.TB, cfg config.Config) *Server {
	t.Helper()
	return startServer(struct{ testing.TB }{t}, cfg)
}

// startRelay starts a server for a relay config and waits until its
// stream mirrors (or has stopped).
func startRelay(t testing.TB, cfg config.Config) *Server {
	t.Helper()
	srv := startNode(t, cfg)
	waitFor(t, "the relay mirroring", 20*time.Second, func() bool {
		r := streamStats(srv, cfg.Streams[0].Name).Relay
		return r != nil && r.State != relayConnecting
	})
	return srv
}

// collector reads every frame of one subscription, raw, until it ends. It
// keeps the frames (collect), or only their count and a digest of them in
// order (digest), which is all a fan-out of millions of frames can hold.
type collector struct {
	mu     sync.Mutex
	keep   bool
	frames [][]byte
	n      int
	sum    hash.Hash // SHA-256 of each frame, length-prefixed, in order
	err    error
	done   chan struct{}
}

func collect(t testing.TB, url string) *collector { return startCollector(t, url, true) }

func digest(t testing.TB, url string) *collector { return startCollector(t, url, false) }

func startCollector(t testing.TB, url string, keep bool) *collector {
	t.Helper()
	ws, _ := mustDial(t, url)
	c := &collector{keep: keep, sum: sha256.New(), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		var n [8]byte
		for {
			_, msg, err := ws.ReadMessage()
			c.mu.Lock()
			if err != nil {
				c.err = err
				c.mu.Unlock()
				return
			}
			c.n++
			binary.BigEndian.PutUint64(n[:], uint64(len(msg)))
			c.sum.Write(n[:])
			c.sum.Write(msg)
			if c.keep {
				c.frames = append(c.frames, msg)
			}
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { ws.Close(); <-c.done })
	return c
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// digestOf returns the count and digest of the frames received so far.
func (c *collector) digestOf() (int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, hex.EncodeToString(c.sum.Sum(nil))
}

// waitLen waits until c holds n frames, failing early when its
// subscription ended.
func (c *collector) waitLen(t testing.TB, what string, n int) {
	t.Helper()
	waitFor(t, what, time.Duration(testkit.SoakCount(60, 900))*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.err != nil && c.n < n {
			t.Fatalf("%s: the subscription ended after %d of %d frames: %v", what, c.n, n, c.err)
		}
		return c.n >= n
	})
}

// waitLenQuiet waits until c holds n frames or its subscription ended,
// for a goroutine that must not fail the test.
func (c *collector) waitLenQuiet(n int) {
	for {
		c.mu.Lock()
		ok := c.n >= n || c.err != nil
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-c.done:
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// snapshot returns the frames received so far.
func (c *collector) snapshot() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.frames...)
}

// sameFrames fails unless got is want, frame by frame, byte for byte.
func sameFrames(t testing.TB, who string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d frames, want %d", who, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: frame %d is %s, the origin's is %s", who, i, got[i], want[i])
		}
	}
}

// publishRows publishes n trades to url in batches of 50 from one
// publisher, acknowledged; under STREAMCAST_SOAK=full it paces them at
// 20k rows/s.
func publishRows(t testing.TB, url string, from, n int) {
	t.Helper()
	ws, g := mustDial(t, url+"?publish")
	p := &pubConn{t: t, ws: ws, g: g}
	const per = 50
	var tick *time.Ticker
	if testkit.SoakFull() {
		tick = time.NewTicker(time.Second / (20000 / per))
		defer tick.Stop()
	}
	for i := 0; i < n; i += per {
		k := min(per, n-i)
		if r := p.roundTrip(batch(from+i, k)); r.Error != "" || len(r.OK) != k {
			t.Fatalf("publish: %+v", r)
		}
		if tick != nil {
			<-tick.C
		}
	}
	_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""), time.Now().Add(time.Second))
}

// TestRelaysServeTheOriginsFramesByteForByte: an origin, two relays of it
// and a relay of a relay, subscribers on each; every subscriber gets every
// row once, in order, byte-identical to the origin's frames, live and
// replayed, and the relays greet with the origin's identity and schema.
func TestRelaysServeTheOriginsFramesByteForByte(t *testing.T) {
	origin := startNode(t, originConfig(t))
	up := wsURL(origin, "/trades")
	r1 := startRelay(t, relayConfig(t, up, true))
	r2 := startRelay(t, relayConfig(t, up, true))
	chain := startRelay(t, relayConfig(t, wsURL(r1, "/trades"), true))

	rows := testkit.SoakCount(3000, 100000) // at 20k rows/s under full (publishRows)
	subs := testkit.SoakCount(4, 100)
	ref := collect(t, up+"?offset=0")
	// One subscriber on each relay keeps its frames, to name the first
	// that differs; the others keep a digest, which says whether they do.
	var kept, digests []*collector
	for _, node := range []*Server{r1, r2} {
		kept = append(kept, collect(t, wsURL(node, "/trades?offset=0")))
		for range subs - 1 {
			digests = append(digests, digest(t, wsURL(node, "/trades?offset=0")))
		}
	}
	kept = append(kept, collect(t, wsURL(chain, "/trades?offset=0")), collect(t, wsURL(chain, "/trades")))

	publishRows(t, up, 0, rows)
	ref.waitLen(t, "the origin's subscriber", rows)
	want := ref.snapshot()
	for i, c := range kept {
		c.waitLen(t, "a relay's subscriber", rows)
		sameFrames(t, "relay subscriber "+itoa(int64(i)), c.snapshot(), want)
	}
	n, sum := ref.digestOf()
	for i, c := range digests {
		c.waitLen(t, "a relay's subscriber", rows)
		if cn, csum := c.digestOf(); cn != n || csum != sum {
			t.Fatalf("relay subscriber %d got %d frames with digest %s; the origin's subscriber %d with %s", i, cn, csum, n, sum)
		}
	}

	// Replayed from a relay's own log, and from the chain's: the same bytes.
	for name, node := range map[string]*Server{"relay": r2, "chain": chain} {
		late := collect(t, wsURL(node, "/trades?offset=0"))
		late.waitLen(t, name+"'s late subscriber", rows)
		sameFrames(t, name+"'s late subscriber", late.snapshot(), want)
	}

	_, og := mustDial(t, up)
	for name, node := range map[string]*Server{"relay": r1, "chain": chain} {
		_, g := mustDial(t, wsURL(node, "/trades"))
		if g.StreamID == "" || g.StreamID != og.StreamID || !bytes.Equal(g.Schema, og.Schema) || g.EndOffset != og.EndOffset || !g.Durable {
			t.Errorf("%s greets %+v; the origin %+v", name, g, og)
		}
		st := streamStats(node, "trades")
		if st.Relay == nil || st.Relay.State != relayMirroring || st.Relay.RowsMirrored != int64(rows) {
			t.Errorf("%s /stats relay: %+v", name, st.Relay)
		}
		if st.PublishLagRows != nil || st.PublishedThrough != nil {
			t.Errorf("%s /stats reports publishing (published_through %v, lag %v), but a relay publishes nothing", name, st.PublishedThrough, st.PublishLagRows)
		}
	}
}

// TestRelayRefusesPublishersNamingItsUpstream: publishing to a relay is
// refused with 4421, whose reason names the upstream to publish to.
func TestRelayRefusesPublishersNamingItsUpstream(t *testing.T) {
	origin := startNode(t, originConfig(t))
	up := wsURL(origin, "/trades")
	relay := startRelay(t, relayConfig(t, up, true))
	_, _, err := dial(t, wsURL(relay, "/trades?publish"))
	code, reason := closeOf(err)
	if code != wire.CloseRelay {
		t.Fatalf("publish to a relay: %v, want close %d", err, wire.CloseRelay)
	}
	var ro *wire.RelayOnly
	if e := wire.ParseClose(code, reason); !errors.As(e, &ro) || ro.Upstream != up {
		t.Fatalf("reason %s parses to %v; want the upstream %s", reason, e, up)
	}
}

// TestLiveRelayPassesTheOriginsFramesOn: a relay with durable: false keeps
// no log but still hands its subscribers the origin's frames as they came.
func TestLiveRelayPassesTheOriginsFramesOn(t *testing.T) {
	origin := startNode(t, originConfig(t))
	up := wsURL(origin, "/trades")
	relay := startRelay(t, relayConfig(t, up, false))
	ref := collect(t, up)
	sub := collect(t, wsURL(relay, "/trades"))
	// The relay's subscriber attached after the relay's own subscription,
	// which is live: rows published from now on reach both.
	waitFor(t, "the relay mirroring", 20*time.Second, func() bool {
		r := streamStats(relay, "trades").Relay
		return r != nil && r.State == relayMirroring
	})
	rows := testkit.SoakCount(500, 20000)
	publishRows(t, up, 0, rows)
	ref.waitLen(t, "the origin's subscriber", rows)
	sub.waitLen(t, "the live relay's subscriber", rows)
	sameFrames(t, "live relay subscriber", sub.snapshot(), ref.snapshot())
}

// TestRelayStopsLoudlyOnTooOldAndSkipsNothing: a chain whose middle relay
// bounds replay; the last relay mirrors a few rows, is shut down while the
// upstream moves on beyond max_replay, and restarts on its log: asked to
// resume at its end, it is refused too_old, reports it in /stats and
// commits nothing, rather than starting where the upstream would let it.
func TestRelayStopsLoudlyOnTooOldAndSkipsNothing(t *testing.T) {
	origin := startNode(t, originConfig(t))
	up := wsURL(origin, "/trades")
	mcfg := relayConfig(t, up, true)
	ten := int64(10)
	mcfg.Streams[0].MaxReplay = &ten
	mid := startRelay(t, mcfg)
	sub := collect(t, wsURL(mid, "/trades?offset=0"))
	lcfg := relayConfig(t, wsURL(mid, "/trades"), true)
	last := startRelay(t, lcfg)
	publishRows(t, up, 0, 5)
	closeOnceMirrored(t, last, 5)
	publishRows(t, up, 5, 100)
	sub.waitLen(t, "the middle relay's subscriber", 105)

	last = startRelay(t, lcfg)
	waitFor(t, "the last relay to stop", 20*time.Second, func() bool {
		r := streamStats(last, "trades").Relay
		return r != nil && r.State == relayStopped
	})
	st := streamStats(last, "trades")
	if !strings.Contains(st.Relay.Error, "max_replay") {
		t.Errorf("/stats relay error %q does not say why (max_replay)", st.Relay.Error)
	}
	if st.EndOffset == nil || *st.EndOffset != 6 || st.Relay.RowsMirrored != 0 {
		t.Errorf("a refused relay committed rows: end %v, mirrored %d since the restart", st.EndOffset, st.Relay.RowsMirrored)
	}
}

// TestRelayKilledAndRestartedResumesWithoutAGap: SIGKILL a relay (a child
// process) mid-load and restart it on its log; its subscriber resumes by
// offset there and ends with every row once, byte-identical to the
// origin's.
func TestRelayKilledAndRestartedResumesWithoutAGap(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	origin := startNode(t, originConfig(t))
	up := wsURL(origin, "/trades")
	ref := collect(t, up+"?offset=0")
	rcfg := relayConfig(t, up, true)
	ch := startChild(t, rcfg)
	sub := collect(t, "ws://"+ch.addr+"/trades?offset=0")

	rows := testkit.SoakCount(2000, 100000)
	// Published from this goroutine, so a failure can stop the test;
	// the kill happens from the watcher below once a quarter arrived.
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		sub.waitLenQuiet(rows / 4)
		_ = ch.cmd.Process.Signal(syscall.SIGKILL)
	}()
	publishRows(t, up, 0, rows)
	<-killed
	<-ch.done
	<-sub.done
	got := sub.snapshot()
	t.Logf("the relay was killed after its subscriber got %d of %d rows", len(got), rows)

	rcfg.Listen = ch.addr
	ch2 := startChild(t, rcfg)
	resume := int64(1)
	if len(got) > 0 {
		resume = offsetOf(t, got[len(got)-1]) + 1
	}
	again := collect(t, "ws://"+ch2.addr+"/trades?offset="+itoa(resume))
	again.waitLen(t, "the relay's subscriber after the restart", rows-len(got))
	ref.waitLen(t, "the origin's subscriber", rows)
	sameFrames(t, "the relay's subscriber across the kill", append(got, again.snapshot()...), ref.snapshot())
}

// TestOriginKilledRelaysReconnectLosingNothing: SIGKILL the origin (a child
// process) while a relay mirrors it, restart it; the relay reconnects and
// its subscriber ends with every acknowledged row once, byte-identical to
// the restarted origin's replay.
func TestOriginKilledRelaysReconnectLosingNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	ocfg := originConfig(t)
	ch := startChild(t, ocfg)
	up := "ws://" + ch.addr + "/trades"
	relay := startRelay(t, relayConfig(t, up, true))
	sub := collect(t, wsURL(relay, "/trades?offset=0"))

	before := testkit.SoakCount(1000, 50000)
	publishRows(t, up, 0, before)
	sub.waitLen(t, "the relay's subscriber before the kill", before)
	if err := ch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-ch.done
	waitFor(t, "the relay to notice", 20*time.Second, func() bool {
		return streamStats(relay, "trades").Relay.State == relayConnecting
	})

	ocfg.Listen = ch.addr
	ch2 := startChild(t, ocfg)
	up = "ws://" + ch2.addr + "/trades"
	after := testkit.SoakCount(1000, 50000)
	publishRows(t, up, before, after)
	ref := collect(t, up+"?offset=0")
	ref.waitLen(t, "the restarted origin's subscriber", before+after)
	sub.waitLen(t, "the relay's subscriber", before+after)
	sameFrames(t, "the relay's subscriber across the origin's kill", sub.snapshot(), ref.snapshot())
	if n := streamStats(relay, "trades").Relay.Reconnects; n < 1 {
		t.Errorf("relay reconnects %d, want at least 1", n)
	}
}

// offsetOf returns a raw data frame's offset.
func offsetOf(t testing.TB, raw []byte) int64 {
	t.Helper()
	var parts []json.RawMessage
	var off int64
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) != 3 || json.Unmarshal(parts[0], &off) != nil {
		t.Fatalf("%s is not a data frame with an offset", raw)
	}
	return off
}

// TestRelayAuthenticatesToItsUpstream: a relay sends the credentials of its
// upstream: URL (or Options.UpstreamCredentials) to an origin with an
// auth: section; refused ones stop serve from starting, with the status.
func TestRelayAuthenticatesToItsUpstream(t *testing.T) {
	ocfg := authConfig(t)
	ocfg.Streams = ocfg.Streams[:1]
	origin := startNode(t, ocfg)
	host := origin.Addr().String()
	withURL := startRelay(t, relayConfig(t, "ws://alice:"+url.QueryEscape(alicePW)+"@"+host+"/trades", true))
	rcfg := relayConfig(t, "ws://"+host+"/trades", true)
	srv, err := runUntilReady(t, rcfg, Options{UpstreamCredentials: url.UserPassword("alice", alicePW)})
	if err != nil {
		t.Fatalf("a relay with Options.UpstreamCredentials: %v", err)
	}
	for name, node := range map[string]*Server{"credentials in the URL": withURL, "credentials in Options": srv} {
		waitFor(t, name+" mirroring", 20*time.Second, func() bool {
			r := streamStats(node, "trades").Relay
			return r != nil && r.State == relayMirroring
		})
	}

	bad, err := runUntilReady(t, relayConfig(t, "ws://bob:"+url.QueryEscape(bobPW)+"@"+host+"/trades", true), Options{})
	if bad != nil {
		t.Fatal("serve started a relay whose user may not read the upstream")
	}
	var denied *wire.AccessDenied
	if !errors.As(err, &denied) || denied.Status != http.StatusForbidden || strings.Contains(err.Error(), bobPW) {
		t.Fatalf("a relay whose user may not read the upstream: %v; want 403, without the password", err)
	}
}

// TestDurableRelayOfALiveStreamIsRefused: a live-only stream's rows have no
// offsets, so a durable relay of it has nothing to keep them at; serve
// says so rather than start.
func TestDurableRelayOfALiveStreamIsRefused(t *testing.T) {
	origin := startNode(t, testConfig(t))
	srv, err := runUntilReady(t, relayConfig(t, wsURL(origin, "/live"), true), Options{})
	if srv != nil {
		t.Fatal("serve started a durable relay of a live-only stream")
	}
	if err == nil || !strings.Contains(err.Error(), "durable: false") {
		t.Fatalf("Run: %v; want a refusal saying to set durable: false", err)
	}
}

// runUntilReady runs a server for cfg until the test ends and returns it
// once ready, or returns why Run ended before it was (a server that fails
// to start is a result here, not a test failure).
func runUntilReady(t testing.TB, cfg config.Config, o Options) (*Server, error) {
	t.Helper()
	srv, err := New(cfg, o)
	if err != nil {
		return nil, err
	}
	var runErr error
	ran := make(chan struct{})
	go func() { runErr = srv.Run(context.Background()); close(ran) }()
	t.Cleanup(func() { _ = srv.Close(); <-ran })
	select {
	case <-srv.Ready():
		return srv, nil
	case <-ran:
		return nil, runErr
	}
}

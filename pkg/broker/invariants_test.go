package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/wire"
)

// pipeline runs one publisher sending frames from next() as fast as the
// server takes them until stop is closed or next returns "", then collects
// every reply. acked
// is called for each ok reply with the frame it answers.
func pipeline(t testing.TB, p *pubConn, stop <-chan struct{}, next func() string, acked func(frame string, r wire.Reply)) (sent int, closeErr error) {
	frames := make(chan string, 1<<16)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(frames)
		for {
			select {
			case <-stop:
				return
			default:
			}
			f := next()
			if f == "" {
				return
			}
			if err := p.send(f); err != nil {
				return
			}
			frames <- f
		}
	}()
	for f := range frames {
		sent++
		r, err := p.reply()
		if err != nil {
			closeErr = err
			break
		}
		if r.Error != "" {
			t.Errorf("publish refused: %+v", r)
			continue
		}
		acked(f, r)
	}
	// Drain so the sender can end.
	for range frames {
	}
	wg.Wait()
	return sent, closeErr
}

// TestSubscribePartitionIsExactUnderLoad is I2: 8 publishers at full speed
// while 50 subscribers attach at random offsets and times; each receives
// exactly the offsets from its start on, in order, no gap, no duplicate.
func TestSubscribePartitionIsExactUnderLoad(t *testing.T) {
	cfg := testConfig(t)
	cfg.Limits.MaxBacklog = 1 << 20
	cfg.Streams[0].MaxReplay = nil
	// Not a keepalive test: under -race on a loaded machine a subscriber can
	// take longer than two 20 s ping intervals to reach a ping queued behind
	// its backlog (seen once), and being dropped then is keepalive's call.
	srv := startServer(t, cfg, Options{PingInterval: time.Hour})
	stop := make(chan struct{})
	var pubs sync.WaitGroup
	var seq atomic.Int64
	// Rows each of the 50 subscribers reads at most (about): fewer in the
	// README's run, to keep it within its budget on a 2-core box.
	bound := int64(testkit.SoakCount(20000, 60000))
	if raceEnabled {
		// The race run is after data races, not scale: 3,000 rows take
		// 50 subscribers through attach-while-committing often enough
		// (8,000 took 46 s under -race on a 2-core box).
		bound = 3000
	}
	for k := 0; k < 8; k++ {
		p := dialPublisher(t, srv, "trades")
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			pipeline(t, p, stop, func() string {
				n := 1 + rand.Intn(4)
				if seq.Load() > bound {
					time.Sleep(5 * time.Millisecond) // bound the rows each subscriber reads
				}
				return batch(int(seq.Add(int64(n))), n)
			}, func(string, wire.Reply) {})
		}()
	}

	type result struct {
		start, next int64
		err         error
	}
	const nsubs = 50
	results := make([]result, nsubs)
	var attached, subsDone sync.WaitGroup
	var read atomic.Int64 // frames read by all the subscribers
	var sentinelOffset atomic.Int64
	sentinelOffset.Store(-1)
	for i := 0; i < nsubs; i++ {
		time.Sleep(time.Duration(rand.Intn(20)) * time.Millisecond)
		end := *streamStats(srv, "trades").EndOffset
		path := "/trades"
		switch rand.Intn(5) {
		case 0: // live
		case 1:
			path += "?offset=0"
		default:
			path += fmt.Sprintf("?offset=%d", 1+rand.Int63n(end))
		}
		ws, g := mustDial(t, wsURL(srv, path))
		start := g.EndOffset
		if g.Replay != nil {
			start = g.Replay.Start
		}
		results[i].start, results[i].next = start, start
		attached.Add(1)
		subsDone.Add(1)
		go func(i int, ws *websocket.Conn) {
			defer subsDone.Done()
			attached.Done()
			r := &results[i]
			for {
				f, err := readFrame(t, ws)
				if err != nil {
					r.err = err
					return
				}
				if f.Offset != r.next {
					r.err = fmt.Errorf("subscriber from %d: got offset %d, want %d", r.start, f.Offset, r.next)
					return
				}
				r.next++
				read.Add(1)
				if bytes.Contains(f.Row, []byte(`"event_ts":1699999999999999,`)) {
					return // trade(-1): the last row
				}
			}
		}(i, ws)
	}
	attached.Wait()
	close(stop)
	pubs.Wait()
	// A last row everyone must reach.
	p := dialPublisher(t, srv, "trades")
	r := p.roundTrip(trade(-1))
	sentinelOffset.Store(r.OK[0])
	done := make(chan struct{})
	go func() { subsDone.Wait(); close(done) }()
	// However long the reading takes on a loaded box (under -race, 50
	// subscribers read millions of frames), it fails only on a stall.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for seen, moved := int64(-1), time.Now(); ; {
		select {
		case <-done:
		case <-tick.C:
			if n := read.Load(); n != seen {
				seen, moved = n, time.Now()
			} else if time.Since(moved) > 30*time.Second {
				t.Fatalf("subscribers did not reach the last row: no frame read for 30 s, %d read in all", n)
			}
			continue
		}
		break
	}
	for i, r := range results {
		if r.err != nil {
			t.Errorf("subscriber %d: %v", i, r.err)
		} else if r.next != sentinelOffset.Load()+1 {
			t.Errorf("subscriber %d from %d ended at %d", i, r.start, r.next)
		}
	}
	t.Logf("%d rows, %d subscribers", sentinelOffset.Load(), nsubs)
}

// TestReplayedFramesAreByteIdentical is I4: a frame replayed from the buffer,
// and from a sealed Parquet file, equals the live frame byte for byte.
func TestReplayedFramesAreByteIdentical(t *testing.T) {
	cfg := testConfig(t)
	srv := startServer(t, cfg)
	live, _ := mustDial(t, wsURL(srv, "/trades"))
	p := dialPublisher(t, srv, "trades")
	rows := []string{
		`{"event_ts":1790038800123456,"symbol":"BTC-USD","price":85565.0,"amount":0.015,"side":0}`,
		`{"side":1,"amount":1e-7,"price":1.5e300,"symbol":"ünïcødé \"q\" \\ \u0001","event_ts":-5,"trade_id":"t-1"}`,
		`{"event_ts":3,"symbol":"","price":-0.0,"amount":123456789012345680000,"side":-2147483648,"trade_id":null}`,
		batch(10, 40),
	}
	n := 0
	for _, r := range rows {
		rep := p.roundTrip(r)
		if rep.Error != "" {
			t.Fatalf("%s: %+v", r, rep)
		}
		n += len(rep.OK)
	}
	liveFrames := make([][]byte, n)
	for i := range liveFrames {
		f, err := readFrame(t, live)
		if err != nil {
			t.Fatal(err)
		}
		liveFrames[i] = f.Raw
	}
	check := func(tier string) {
		sub, g := mustDial(t, wsURL(srv, "/trades?offset=1"))
		if g.Replay == nil || g.Replay.End != int64(n+1) {
			t.Fatalf("%s: replay %v", tier, g.Replay)
		}
		for i := range liveFrames {
			f, err := readFrame(t, sub)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(f.Raw, liveFrames[i]) {
				t.Fatalf("%s: replayed frame %d\n%s\ndiffers from the live one\n%s", tier, i+1, f.Raw, liveFrames[i])
			}
		}
	}
	check("buffer")

	// Seal everything into a Parquet file and drop it from the buffer.
	dir := srv.reg.Get("trades").log.Dir()
	m, err := logstore.Open(dir, logstore.Maintainer)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if sealed, err := m.Seal(ctx, true); err != nil || sealed == 0 {
		t.Fatalf("seal: %d %v", sealed, err)
	}
	if c, err := m.Clean(ctx); err != nil || c.BufferRows == 0 {
		t.Fatalf("evict: %d %v", c.BufferRows, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	check("sealed file")
}

// TestStalledSubscriberIsIsolatedAndResumes is I5: a subscriber that stops
// reading does not slow publishers or other subscribers, is dropped with 4429
// after a contiguous prefix, and resuming at the offset given loses nothing.
func TestStalledSubscriberIsIsolatedAndResumes(t *testing.T) {
	cfg := testConfig(t)
	cfg.Limits.MaxBacklog = 3000 // a reading subscriber keeps up, even under -race
	// The stalled subscriber starts reading only once every row is
	// published, which under -race on a loaded machine can take longer
	// than the default grace a dropped subscriber gets.
	srv := startServer(t, cfg, Options{DropGrace: 2 * time.Minute})
	pad := strings.Repeat("x", 8000)
	row := func(i int) string {
		return fmt.Sprintf(`{"event_ts":%d,"symbol":"%s","price":1.0,"amount":1.0,"side":0}`, i, pad)
	}
	const n = 6000 // ~48 MB: more than the socket buffers and the backlog hold
	publishAll := func(from int) time.Duration {
		p := dialPublisher(t, srv, "trades")
		start := time.Now()
		go func() {
			for i := 0; i < n; i++ {
				if err := p.send(row(from + i)); err != nil {
					return
				}
			}
		}()
		for i := 0; i < n; i++ {
			if r, err := p.reply(); err != nil || r.Error != "" {
				t.Fatalf("reply %d: %+v %v", i, r, err)
			}
		}
		return time.Since(start)
	}
	reader := func(ws *websocket.Conn, from int64, count int) chan error {
		errc := make(chan error, 1)
		go func() {
			next := from
			for i := 0; i < count; i++ {
				// Read the offset only: a reader that parses every row
				// is slower than the publisher under -race, and a
				// subscriber slower than the publisher is dropped, rightly.
				_, msg, err := ws.ReadMessage()
				if err != nil {
					errc <- err
					return
				}
				if want := fmt.Sprintf("[%d,", next); !bytes.HasPrefix(msg, []byte(want)) {
					errc <- fmt.Errorf("reader got %.20s, want offset %d", msg, next)
					return
				}
				next++
			}
			errc <- nil
		}()
		return errc
	}

	// Baseline: one reading subscriber.
	fast1, g := mustDial(t, wsURL(srv, "/trades"))
	done1 := reader(fast1, g.EndOffset, n)
	base := publishAll(0)
	if err := <-done1; err != nil {
		t.Fatal(err)
	}

	// Again with a subscriber that never reads.
	stalled, _, err := websocket.DefaultDialer.Dial(wsURL(srv, "/trades"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	fast2, g2 := mustDial(t, wsURL(srv, "/trades"))
	from := g2.EndOffset
	done2 := reader(fast2, from, n)
	withStalled := publishAll(n)
	if err := <-done2; err != nil {
		t.Fatalf("the reading subscriber suffered: %v", err)
	}
	t.Logf("publish %d rows: %v alone, %v with a stalled subscriber", n, base, withStalled)
	if withStalled > 5*base+2*time.Second {
		t.Errorf("a stalled subscriber slowed the publisher: %v vs %v", withStalled, base)
	}

	// The stalled subscriber now reads: greeting, a contiguous prefix, 4429.
	_ = stalled.SetReadDeadline(time.Now().Add(60 * time.Second))
	_, msg, err := stalled.ReadMessage()
	if err != nil {
		t.Fatalf("greeting: %v", err)
	}
	sg, err := wire.ParseGreeting(msg)
	if err != nil || sg.EndOffset != from {
		t.Fatalf("greeting %s: %v", msg, err)
	}
	next := from
	var closeErr error
	for {
		f, err := readFrame(t, stalled)
		if err != nil {
			closeErr = err
			break
		}
		if f.Offset != next {
			t.Fatalf("prefix has a hole: %d after %d", f.Offset, next-1)
		}
		next++
	}
	code, reason := closeOf(closeErr)
	if code != wire.CloseTooSlow {
		t.Fatalf("stalled subscriber ended with %v, want 4429", closeErr)
	}
	ts := wire.ParseClose(code, reason).(*wire.TooSlow)
	if ts.Offset != next || ts.Behind <= 0 || next >= from+n {
		t.Fatalf("4429 %s after receiving up to %d", reason, next-1)
	}
	// Resume where it said: the rest arrives, nothing lost.
	resumed, rg := mustDial(t, wsURL(srv, fmt.Sprintf("/trades?offset=%d", ts.Offset)))
	if rg.Replay == nil || rg.Replay.Start != ts.Offset {
		t.Fatalf("resume greeting %+v", rg)
	}
	if err := <-reader(resumed, ts.Offset, int(from+n-ts.Offset)); err != nil {
		t.Fatal(err)
	}
}

// TestShutdownSends1001AndLosesNoAcknowledgedRow stops the server while
// publishers pipeline rows: every acknowledged row is in the log afterwards,
// every subscriber received every acknowledged row, and every connection got
// 1001.
func TestShutdownSends1001AndLosesNoAcknowledgedRow(t *testing.T) {
	cfg := testConfig(t)
	cfg.Limits.MaxBacklog = 1 << 20
	cfg.Streams[0].MaxReplay = nil
	srv, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(context.Background()) }()
	<-srv.Ready()

	var subs []*websocket.Conn
	for i := 0; i < 3; i++ {
		ws, _ := mustDial(t, wsURL(srv, "/trades"))
		subs = append(subs, ws)
	}
	seen := make([]int64, len(subs))
	subErr := make([]error, len(subs))
	var subWG sync.WaitGroup
	for i, ws := range subs {
		subWG.Add(1)
		go func(i int, ws *websocket.Conn) {
			defer subWG.Done()
			for {
				f, err := readFrame(t, ws)
				if err != nil {
					subErr[i] = err
					return
				}
				seen[i] = f.Offset
			}
		}(i, ws)
	}

	var mu sync.Mutex
	acked := map[int64]int64{}
	var seq atomic.Int64
	var pubWG sync.WaitGroup
	pubErr := make([]error, 4)
	never := make(chan struct{})
	for k := 0; k < 4; k++ {
		p := dialPublisher(t, srv, "trades")
		pubWG.Add(1)
		go func(k int) {
			defer pubWG.Done()
			_, pubErr[k] = pipeline(t, p, never, func() string {
				return batch(int(seq.Add(3)), 3)
			}, func(f string, r wire.Reply) {
				ts := eventTimes(t, f)
				mu.Lock()
				for j, o := range r.OK {
					acked[o] = ts[j]
				}
				mu.Unlock()
			})
		}(k)
	}
	time.Sleep(300 * time.Millisecond)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	pubWG.Wait()
	subWG.Wait()
	for k, err := range pubErr {
		if code, _ := closeOf(err); code != wire.CloseGoingAway {
			t.Errorf("publisher %d ended with %v, want 1001", k, err)
		}
	}
	var maxAcked int64
	for o := range acked {
		maxAcked = max(maxAcked, o)
	}
	for i, err := range subErr {
		if code, _ := closeOf(err); code != wire.CloseGoingAway {
			t.Errorf("subscriber %d ended with %v, want 1001", i, err)
		}
		if seen[i] < maxAcked {
			t.Errorf("subscriber %d saw up to %d, but %d was acknowledged", i, seen[i], maxAcked)
		}
	}
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged")
	}

	// Restart on the same root: every acknowledged row is there.
	srv2 := startServer(t, cfg)
	verifyAcked(t, srv2, acked, nil)
	t.Logf("%d rows acknowledged before shutdown", len(acked))
}

// eventTimes returns the event_ts of each row of a publish frame.
func eventTimes(t testing.TB, frame string) []int64 {
	var rows []struct {
		EventTS int64 `json:"event_ts"`
	}
	if strings.HasPrefix(frame, "{") {
		frame = "[" + frame + "]"
	}
	if err := json.Unmarshal([]byte(frame), &rows); err != nil {
		t.Fatalf("frame %s: %v", frame, err)
	}
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.EventTS
	}
	return out
}

// verifyAcked subscribes from the start and checks every acknowledged row
// (offset → event_ts) and every seen frame (offset → frame bytes) is there.
func verifyAcked(t testing.TB, srv *Server, acked map[int64]int64, seenFrames map[int64][]byte) {
	t.Helper()
	ws, g := mustDial(t, wsURL(srv, "/trades?offset=1"))
	end := g.EndOffset
	for o := range acked {
		if o >= end {
			t.Fatalf("offset %d was acknowledged but the log ends at %d", o, end)
		}
	}
	for o := range seenFrames {
		if o >= end {
			t.Fatalf("offset %d was delivered but the log ends at %d", o, end)
		}
	}
	for o := int64(1); o < end; o++ {
		f, err := readFrame(t, ws)
		if err != nil {
			t.Fatal(err)
		}
		if f.Offset != o {
			t.Fatalf("replay gave %d, want %d", f.Offset, o)
		}
		if want, ok := acked[o]; ok {
			if got := eventTimes(t, string(f.Row))[0]; got != want {
				t.Fatalf("offset %d holds event_ts %d, acknowledged as %d", o, got, want)
			}
		}
		if fr, ok := seenFrames[o]; ok && !bytes.Equal(fr, f.Raw) {
			t.Fatalf("offset %d holds %s, delivered as %s", o, f.Raw, fr)
		}
	}
}

// TestSilentAndVanishedPeersAreDropped: a subscriber that closes is removed
// at once even on a silent stream, one that stops answering pings is
// dropped by keepalive, and one that answers them stays. The test drives
// keepalive's ticks itself, so a loaded machine cannot make a live peer
// look silent.
func TestSilentAndVanishedPeersAreDropped(t *testing.T) {
	ticks := make(chan time.Time)
	srv := startServer(t, testConfig(t), Options{keepaliveTicks: ticks})
	subs := func() int64 { return streamStats(srv, "trades").Subscribers }
	// tick hands keepalive one tick. The channel is unbuffered, so when a
	// send returns, keepalive has finished the pass of the tick before.
	tick := func() {
		select {
		case ticks <- time.Now():
		case <-time.After(30 * time.Second):
			t.Fatal("keepalive took no tick for 30 s")
		}
	}
	// reads is what keepalive sees of the peers: frames read from them.
	reads := func() int64 {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		var n int64
		for c := range srv.conns {
			n += c.reads.Load()
		}
		return n
	}

	ws, _ := mustDial(t, wsURL(srv, "/trades"))
	waitFor(t, "one subscriber", 5*time.Second, func() bool { return subs() == 1 })
	_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""), time.Now().Add(time.Second))
	waitFor(t, "clean close detaches", 5*time.Second, func() bool { return subs() == 0 })

	ws2, _ := mustDial(t, wsURL(srv, "/trades"))
	waitFor(t, "one subscriber", 5*time.Second, func() bool { return subs() == 1 })
	_ = ws2.NetConn().Close() // vanish without a close frame
	waitFor(t, "vanished peer detaches", 5*time.Second, func() bool { return subs() == 0 })

	// A peer that never reads never answers pings: dropped within three
	// ticks (the ping's own write counts as progress once).
	ws3, _ := mustDial(t, wsURL(srv, "/trades"))
	_ = ws3
	waitFor(t, "one subscriber", 5*time.Second, func() bool { return subs() == 1 })
	for range 4 { // the fourth returns once the third pass is done
		tick()
	}
	waitFor(t, "silent peer dropped by keepalive", 10*time.Second, func() bool { return subs() == 0 })

	// A peer that reads (and so answers pings) stays, tick after tick.
	ws4, _ := mustDial(t, wsURL(srv, "/trades"))
	go func() {
		for {
			if _, _, err := ws4.ReadMessage(); err != nil {
				return
			}
		}
	}()
	waitFor(t, "one subscriber", 5*time.Second, func() bool { return subs() == 1 })
	for i := range 6 {
		before := reads()
		tick()
		waitFor(t, fmt.Sprintf("the pong of ping %d", i+1), 30*time.Second, func() bool { return reads() > before || subs() == 0 })
		if subs() != 1 {
			t.Fatalf("a live peer was dropped after %d pings it answered", i)
		}
	}
	tick() // the sixth pass is done
	if subs() != 1 {
		t.Fatalf("a live peer was dropped")
	}
}

func TestStatsAndHealth(t *testing.T) {
	srv := startServer(t, testConfig(t))
	p := dialPublisher(t, srv, "trades")
	p.roundTrip(batch(0, 3))
	st := streamStats(srv, "trades")
	if !st.Durable || *st.EndOffset != 4 || st.Publishers != 1 || st.LastSendTS == nil || st.UptimeS <= 0 {
		t.Fatalf("stats %+v", st)
	}
	if ls := streamStats(srv, "live"); ls.EndOffset != nil || ls.LastSendTS != nil {
		t.Fatalf("live stats %+v", ls)
	}
	if s := srv.Stats(); s.Process.CPUSeconds <= 0 || s.Process.RSSBytes <= 0 {
		t.Fatalf("process stats %+v", s.Process)
	}
}

func TestHealthFollowsTheServerState(t *testing.T) {
	srv, err := New(testConfig(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		state int32
		code  int
	}{{stateStarting, 503}, {stateReady, 200}, {stateStopping, 503}} {
		srv.state.Store(tc.state)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
		if rec.Code != tc.code {
			t.Errorf("state %d: /health %d, want %d", tc.state, rec.Code, tc.code)
		}
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("GET", "/elsewhere", nil))
	if rec.Code != 404 {
		t.Errorf("/elsewhere: %d", rec.Code)
	}
}

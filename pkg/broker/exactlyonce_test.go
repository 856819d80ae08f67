package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// seqSchema is the schema of the exactly-once test stream "eo": each row
// carries the id that published it and its seq, so the log can be checked.
const seqSchema = `{"type":"object","properties":{"pub":{"type":"string"},"seq":{"type":"integer"}},"required":["pub","seq"]}`

// eoConfig is testConfig plus a durable exactly-once stream "eo".
func eoConfig(t testing.TB) config.Config {
	cfg := testConfig(t)
	eo := config.DefaultStream("eo")
	eo.Schema = config.RawJSON(seqSchema)
	eo.ExactlyOnce = true
	eo.MaxReplay = nil
	cfg.Streams = append(cfg.Streams, eo)
	return cfg
}

// seqRow is the row of seq s published by pub.
func seqRow(pub string, s int64) string {
	return fmt.Sprintf(`{"pub":%q,"seq":%d}`, pub, s)
}

// seqFrame is the exactly-once frame of n rows from seq s: [s, row] for one
// row, [s, [rows…]] for more.
func seqFrame(pub string, s int64, n int) string {
	if n == 1 {
		return fmt.Sprintf("[%d,%s]", s, seqRow(pub, s))
	}
	rows := make([]string, n)
	for i := range rows {
		rows[i] = seqRow(pub, s+int64(i))
	}
	return fmt.Sprintf("[%d,[%s]]", s, strings.Join(rows, ","))
}

// dialEO connects an exactly-once publisher with id to srv's "eo" stream.
func dialEO(t testing.TB, srv *Server, id string) *pubConn {
	t.Helper()
	ws, g := mustDial(t, wsURL(srv, "/eo?publish&publisher="+id))
	if g.Publisher == nil || g.Publisher.ID != id {
		t.Fatalf("greeting of publisher %q carries mark %+v", id, g.Publisher)
	}
	return &pubConn{t: t, ws: ws, g: g}
}

// logged is one row read back from the log.
type logged struct {
	Offset int64
	Pub    string
	Seq    int64
}

// readLog reads every row of the "eo" stream at addr (host:port).
func readLog(t testing.TB, addr string) []logged {
	t.Helper()
	ws, g := mustDial(t, "ws://"+addr+"/eo?offset=0")
	defer ws.Close()
	var out []logged
	if g.Replay == nil {
		t.Fatalf("greeting %+v has no replay", g)
	}
	for o := g.Replay.Start; o < g.Replay.End; o++ {
		_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		f, err := readFrame(t, ws)
		if err != nil {
			t.Fatalf("read the log at %d: %v", o, err)
		}
		var r struct {
			Pub string `json:"pub"`
			Seq int64  `json:"seq"`
		}
		if err := json.Unmarshal(f.Row, &r); err != nil {
			t.Fatalf("row %s: %v", f.Row, err)
		}
		out = append(out, logged{Offset: f.Offset, Pub: r.Pub, Seq: r.Seq})
	}
	return out
}

// checkSeqs fails unless the rows of pub in the log are exactly seqs 1..n in
// order.
func checkSeqs(t testing.TB, rows []logged, pub string, n int64) {
	t.Helper()
	want := int64(1)
	for _, r := range rows {
		if r.Pub != pub {
			continue
		}
		if r.Seq != want {
			t.Fatalf("publisher %s: offset %d holds seq %d, want %d (each seq exactly once, in order)", pub, r.Offset, r.Seq, want)
		}
		want++
	}
	if want-1 != n {
		t.Fatalf("publisher %s: the log holds seqs 1..%d, want 1..%d", pub, want-1, n)
	}
}

func wantReply(t testing.TB, what string, r wire.Reply, ok []int64, dup bool) {
	t.Helper()
	if r.Error != "" || !equalInts(r.OK, ok) || r.Duplicate != dup {
		t.Fatalf("%s: reply %+v, want ok %v duplicate %v", what, r, ok, dup)
	}
}

const null = wire.Null

func TestExactlyOnceJudgesEachFrameAgainstTheMark(t *testing.T) {
	srv := startServer(t, eoConfig(t))

	// A fresh id: last_seq 0, last_offset null, exactly as written.
	d := websocket.Dialer{}
	raw, _, err := d.Dial(wsURL(srv, "/eo?publish&publisher=p1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_, greet, err := raw.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(greet), `,"publisher":{"id":"p1","last_seq":0,"last_offset":null}}`) {
		t.Fatalf("greeting %s: want a fresh mark", greet)
	}
	p := &pubConn{t: t, ws: raw}

	wantReply(t, "first frame", p.roundTrip(seqFrame("p1", 1, 3)), []int64{1, 2, 3}, false)
	wantReply(t, "next frame, one row", p.roundTrip(seqFrame("p1", 4, 1)), []int64{4}, false)

	r := p.roundTrip(seqFrame("p1", 6, 1))
	if r.Error != wire.ReplySequenceGap || r.Expected != 5 || r.Got != 6 {
		t.Fatalf("a gap: %+v, want sequence_gap expected 5 got 6", r)
	}
	wantReply(t, "a duplicate", p.roundTrip(seqFrame("p1", 2, 2)), []int64{2, 3}, true)
	// 3 and 4 are below the mark, 5 and 6 are new: only they are appended.
	wantReply(t, "a partial overlap", p.roundTrip(seqFrame("p1", 3, 4)), []int64{3, 4, 5, 6}, false)
	wantReply(t, "a duplicate of the mark", p.roundTrip(seqFrame("p1", 6, 1)), []int64{6}, true)

	for _, bad := range []struct{ frame, code, detail string }{
		{seqRow("p1", 7), wire.ReplyBadFrame, "an object without a seq"},
		{"[" + seqRow("p1", 7) + "]", wire.ReplyBadFrame, "no seq"},
		{"[0," + seqRow("p1", 7) + "]", wire.ReplyBadFrame, "seq 0 is not a whole number ≥ 1"},
		{"[-3," + seqRow("p1", 7) + "]", wire.ReplyBadFrame, "not a whole number"},
		{"[7.5," + seqRow("p1", 7) + "]", wire.ReplyBadFrame, "not a whole number"},
		{"[7," + seqRow("p1", 7) + "," + seqRow("p1", 8) + "]", wire.ReplyBadFrame, "3 elements"},
		{"[7,[]]", wire.ReplyBadFrame, "empty list"},
		{`[7,{"pub":"p1"}]`, wire.ReplyRejected, "seq"}, // the schema refuses the row
	} {
		r := p.roundTrip(bad.frame)
		if r.Error != bad.code || !strings.Contains(r.Detail, bad.detail) {
			t.Errorf("frame %s: %+v, want %s naming %q", bad.frame, r, bad.code, bad.detail)
		}
	}
	// The connection stayed open and the mark did not move.
	wantReply(t, "after refusals", p.roundTrip(seqFrame("p1", 7, 1)), []int64{7}, false)
	_ = raw.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""), time.Now().Add(time.Second))

	checkSeqs(t, readLog(t, srv.Addr().String()), "p1", 7)

	// A reconnect is greeted with the committed mark.
	p2 := dialEO(t, srv, "p1")
	if m := p2.g.Publisher; m.LastSeq != 7 || m.LastOffset != 7 {
		t.Fatalf("mark after reconnect %+v, want last_seq 7 last_offset 7", m)
	}
	wantReply(t, "resume after reconnect", p2.roundTrip(seqFrame("p1", 8, 2)), []int64{8, 9}, false)
}

func TestDuplicatesBeyondTheDedupeWindowHaveNullOffsets(t *testing.T) {
	cfg := eoConfig(t)
	srv := startServer(t, cfg)
	p := dialEO(t, srv, "w")
	const frames = DedupeWindow + 6
	// Interleave another id so offsets differ from seqs.
	other := dialEO(t, srv, "other")
	for s := int64(1); s <= frames; s++ {
		r := p.roundTrip(seqFrame("w", s, 1))
		if r.Error != "" {
			t.Fatal(r)
		}
		if r2 := other.roundTrip(seqFrame("other", s, 1)); r2.Error != "" {
			t.Fatal(r2)
		}
	}
	offsetOf := func(s int64) int64 { return 2*s - 1 } // w's rows sit at odd offsets

	wantReply(t, "inside the window", p.roundTrip(seqFrame("w", frames-3, 2)), []int64{offsetOf(frames - 3), offsetOf(frames - 2)}, true)
	wantReply(t, "beyond the window", p.roundTrip(seqFrame("w", 1, 1)), []int64{null}, true)
	wantReply(t, "straddling the window's edge", p.roundTrip(seqFrame("w", 6, 2)), []int64{null, offsetOf(7)}, true)
	// A partial overlap: the repeated part's offsets are known or null, the
	// new rows follow the frontier.
	end := 2*int64(frames) + 1
	wantReply(t, "overlap", p.roundTrip(seqFrame("w", frames-1, 3)), []int64{offsetOf(frames - 1), offsetOf(frames), end}, false)

	// After a restart only the mark itself is known.
	_ = p.ws.Close()
	_ = other.ws.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv2 := startServer(t, cfg)
	p = dialEO(t, srv2, "w")
	if m := p.g.Publisher; m.LastSeq != frames+1 || m.LastOffset != end {
		t.Fatalf("mark after restart %+v, want last_seq %d last_offset %d", m, frames+1, end)
	}
	wantReply(t, "after a restart", p.roundTrip(seqFrame("w", frames, 2)), []int64{null, end}, true)
}

// holdFirstAppend is an appendHook that holds the stream's first commit
// until release is called; entered is closed once that commit is held.
// release is also registered to run when the test ends, before the
// server's own cleanup, so a failing test never leaves the committer stuck.
func holdFirstAppend(t *testing.T) (hook func(context.Context, *logstore.Log, [][]byte, int64, []logstore.Mark) (int64, error), entered <-chan struct{}, release func()) {
	in, out := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	var once sync.Once
	release = func() { once.Do(func() { close(out) }) }
	hook = func(ctx context.Context, l *logstore.Log, rows [][]byte, ts int64, marks []logstore.Mark) (int64, error) {
		if first.CompareAndSwap(false, true) {
			close(in)
			<-out
		}
		return l.Append(ctx, rows, ts, marks)
	}
	return hook, in, release
}

// pendingFrames is how many frames id has queued and not yet answered.
func pendingFrames(srv *Server, stream, id string) int {
	ps, _ := srv.reg.Get(stream).marks.State(id)
	return ps.Pending
}

// TestDuplicateOfQueuedRowsWaitsForTheirCommit: a frame repeating rows that
// are queued but not committed waits for them and is answered after them,
// with their offsets. The first commit is held until every frame behind it
// is judged, so the duplicates are judged while their originals are queued
// or in flight, never committed.
func TestDuplicateOfQueuedRowsWaitsForTheirCommit(t *testing.T) {
	hook, entered, release := holdFirstAppend(t)
	srv := startServer(t, eoConfig(t), Options{appendHook: hook})
	t.Cleanup(release)
	p := dialEO(t, srv, "q")
	if err := p.send(seqFrame("q", 1, 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first frame never reached the log")
	}
	// Seq 1 is in the held commit. Behind it: seqs 2-6; a duplicate of 3-4
	// (queued); 1-7 (1 in flight, 2-6 queued, 7 new); 7-8 (7 queued, 8 new).
	for _, f := range []string{seqFrame("q", 2, 5), seqFrame("q", 3, 2), seqFrame("q", 1, 7), seqFrame("q", 7, 2)} {
		if err := p.send(f); err != nil {
			t.Fatal(err)
		}
	}
	// Each of the five frames waits for a commit, the duplicates too: none
	// could be answered from what is committed, for nothing is.
	waitFor(t, "all five frames waiting behind the held commit", 10*time.Second, func() bool {
		return pendingFrames(srv, "eo", "q") == 5
	})
	release()
	for i, w := range []struct {
		ok  []int64
		dup bool
	}{
		{[]int64{1}, false},
		{[]int64{2, 3, 4, 5, 6}, false},
		{[]int64{3, 4}, true},
		{[]int64{1, 2, 3, 4, 5, 6, 7}, false},
		{[]int64{7, 8}, false},
	} {
		r, err := p.reply()
		if err != nil {
			t.Fatal(err)
		}
		wantReply(t, fmt.Sprintf("reply %d", i), r, w.ok, w.dup)
	}
	checkSeqs(t, readLog(t, srv.Addr().String()), "q", 8)
}

// TestFailedCommitRollsTheMarkBack: after commit_failed the same seqs are
// accepted again, and a frame queued behind the failed one fails too rather
// than land after a hole.
func TestFailedCommitRollsTheMarkBack(t *testing.T) {
	var failing atomic.Bool
	release := make(chan struct{})
	srv := startServer(t, eoConfig(t), Options{appendHook: func(ctx context.Context, l *logstore.Log, rows [][]byte, ts int64, marks []logstore.Mark) (int64, error) {
		if failing.Load() {
			<-release // let the frames behind queue up
			return 0, errors.New("disk full (test)")
		}
		return l.Append(ctx, rows, ts, marks)
	}})
	p := dialEO(t, srv, "f")
	wantReply(t, "before", p.roundTrip(seqFrame("f", 1, 2)), []int64{1, 2}, false)
	failing.Store(true)
	for _, f := range []string{seqFrame("f", 3, 2), seqFrame("f", 5, 1), seqFrame("f", 6, 1)} {
		if err := p.send(f); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "frames queued", 5*time.Second, func() bool {
		ps, _ := srv.reg.Get("eo").marks.State("f")
		return ps.Accepted == 6
	})
	failing.Store(false)
	close(release)
	for i := 0; i < 3; i++ {
		r, err := p.reply()
		if err != nil {
			t.Fatal(err)
		}
		if r.Error != wire.ReplyCommitFailed {
			t.Fatalf("reply %d: %+v, want commit_failed", i, r)
		}
	}
	r := p.roundTrip(seqFrame("f", 5, 1))
	if r.Error != wire.ReplySequenceGap || r.Expected != 3 {
		t.Fatalf("after the failure: %+v, want sequence_gap expected 3", r)
	}
	wantReply(t, "the failed seqs again", p.roundTrip(seqFrame("f", 3, 2)), []int64{3, 4}, false)
	wantReply(t, "and on", p.roundTrip(seqFrame("f", 5, 2)), []int64{5, 6}, false)
	checkSeqs(t, readLog(t, srv.Addr().String()), "f", 6)
}

// TestSupersededPublisherIsClosed4409AfterItsQueuedRowsCount: a second
// connection with the same id closes the first with 4409; the first gets the
// replies of every frame it had queued before that, and the second's greeting
// counts every one of those rows.
func TestSupersededPublisherIsClosed4409AfterItsQueuedRowsCount(t *testing.T) {
	cfg := eoConfig(t)
	cfg.Streams[len(cfg.Streams)-1].GroupCommit = false // one slow commit per frame: a queue builds up
	srv := startServer(t, cfg, Options{appendHook: func(ctx context.Context, l *logstore.Log, rows [][]byte, ts int64, marks []logstore.Mark) (int64, error) {
		time.Sleep(5 * time.Millisecond)
		return l.Append(ctx, rows, ts, marks)
	}})
	old := dialEO(t, srv, "dup")
	const frames, size = 300, 10
	for i := 0; i < frames; i++ {
		if err := old.send(seqFrame("dup", int64(i*size+1), size)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the old connection queued rows", 5*time.Second, func() bool {
		ps, _ := srv.reg.Get("eo").marks.State("dup")
		return ps.Accepted >= 20*size && ps.Pending >= 5
	})
	newer := dialEO(t, srv, "dup")
	mark := newer.g.Publisher

	// The old connection: replies in order for what it queued, then 4409.
	acked := int64(0)
	var closeErr error
	for {
		r, err := old.reply()
		if err != nil {
			closeErr = err
			break
		}
		if r.Error != "" || len(r.OK) != size || r.OK[0] != acked+1 {
			t.Fatalf("old connection reply %+v after %d rows", r, acked)
		}
		acked += size
	}
	code, reason := closeOf(closeErr)
	if code != wire.CloseSuperseded || !strings.Contains(reason, `"publisher":"dup"`) {
		t.Fatalf("old connection ended with %v, want close 4409 naming the publisher", closeErr)
	}
	if mark.LastSeq != acked || mark.LastOffset != acked {
		t.Fatalf("newer greeting mark %+v; the old connection had %d rows acknowledged", mark, acked)
	}
	if acked == 0 || acked == frames*size {
		t.Logf("the race was not exercised fully: %d of %d rows acknowledged", acked, frames*size)
	}
	var sup *wire.Superseded
	if !errors.As(wire.ParseClose(code, reason), &sup) || sup.Publisher != "dup" {
		t.Errorf("the client reads %q as %v", reason, wire.ParseClose(code, reason))
	}
	wantReply(t, "newer resumes", newer.roundTrip(seqFrame("dup", acked+1, 1)), []int64{acked + 1}, false)
	checkSeqs(t, readLog(t, srv.Addr().String()), "dup", acked+1)
}

func TestExactlyOnceRefusalsAndAnonymousPublishers(t *testing.T) {
	srv := startServer(t, eoConfig(t))

	// publisher= on a stream without exactly_once: 4412.
	_, _, err := dial(t, wsURL(srv, "/trades?publish&publisher=p"))
	if code, reason := closeOf(err); code != wire.CloseExactlyOnceUnavailable || !strings.Contains(reason, `"why":"stream"`) {
		t.Errorf("publisher on a plain stream: %v, want 4412 why stream", err)
	}
	// An id that is not UTF-8: 4400.
	_, _, err = dial(t, wsURL(srv, "/eo?publish&publisher=%ff"))
	if code, reason := closeOf(err); code != wire.CloseBadRequest || !strings.Contains(reason, "UTF-8") {
		t.Errorf("publisher id not UTF-8: %v, want 4400", err)
	}
	// A seq on a plain publication: bad_frame, the connection stays open.
	plain := dialPublisher(t, srv, "trades")
	if r := plain.roundTrip("[1," + trade(1) + "]"); r.Error != wire.ReplyBadFrame || !strings.Contains(r.Detail, "no publisher id") {
		t.Errorf("seq on a plain publication: %+v", r)
	}
	if r := plain.roundTrip(trade(1)); r.Error != "" {
		t.Errorf("after: %+v", r)
	}
	// An anonymous publisher on an exactly-once stream publishes at least
	// once: no mark in its greeting, rows without seq.
	anon := dialPublisher(t, srv, "eo")
	if anon.g.Publisher != nil {
		t.Errorf("anonymous greeting carries a mark %+v", anon.g.Publisher)
	}
	wantReply(t, "anonymous", anon.roundTrip(seqRow("anon", 1)), []int64{1}, false)
	wantReply(t, "anonymous again", anon.roundTrip(seqRow("anon", 1)), []int64{2}, false)
	if r := anon.roundTrip(seqFrame("anon", 3, 1)); r.Error != wire.ReplyBadFrame {
		t.Errorf("seq from an anonymous publisher: %+v", r)
	}
	// And an exactly-once publisher beside it starts at offset 3.
	wantReply(t, "named", dialEO(t, srv, "named").roundTrip(seqFrame("named", 1, 1)), []int64{3}, false)

	// exactly_once needs a log.
	cfg := eoConfig(t)
	cfg.Streams[1].ExactlyOnce = true // "live"
	s, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "durable") {
		t.Errorf("exactly_once on a live-only stream: Run = %v", err)
	}
}

// TestGoClientPublishesExactlyOnce drives the feature through pkg/wire.
func TestGoClientPublishesExactlyOnce(t *testing.T) {
	srv := startServer(t, eoConfig(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	url := wsURL(srv, "/eo")
	pub, err := wire.Publish(ctx, url, wire.PublishOptions{Publisher: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if m := pub.Greeting().Publisher; m == nil || m.LastSeq != 0 || m.LastOffset != wire.Null {
		t.Fatalf("fresh mark %+v", m)
	}
	if offs, err := pub.SendBatch(ctx, [][]byte{[]byte(seqRow("go", 1)), []byte(seqRow("go", 2))}); err != nil || !equalInts(offs, []int64{1, 2}) {
		t.Fatalf("batch: %v %v", offs, err)
	}
	// A newer connection supersedes this one.
	pub2, err := wire.Publish(ctx, url, wire.PublishOptions{Publisher: "go"})
	if err != nil {
		t.Fatal(err)
	}
	defer pub2.Close()
	if m := pub2.Greeting().Publisher; m.LastSeq != 2 || m.LastOffset != 2 {
		t.Fatalf("mark %+v, want 2 at 2", m)
	}
	var sup *wire.Superseded
	_, err = pub.Send(ctx, []byte(seqRow("go", 3)))
	if !errors.As(err, &sup) {
		t.Fatalf("superseded connection's send: %v, want *wire.Superseded", err)
	}
	_ = pub.Close()
	if off, err := pub2.Send(ctx, []byte(seqRow("go", 3))); err != nil || off != 3 {
		t.Fatalf("send on the newer connection: %d %v", off, err)
	}
}

// dialRaw connects and reads the greeting without failing the test (for
// goroutines); a refusal is returned as an error.
func dialRaw(url string) (*websocket.Conn, *wire.Greeting, error) {
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	ws, _, err := d.Dial(url, nil)
	if err != nil {
		return nil, nil, err
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, msg, err := ws.ReadMessage()
	if err != nil {
		ws.Close()
		return nil, nil, err
	}
	_ = ws.SetReadDeadline(time.Time{})
	g, err := wire.ParseGreeting(msg)
	if err != nil {
		ws.Close()
		return nil, nil, err
	}
	return ws, g, nil
}

// firePublisher publishes seqs 1..total under one id through connections
// the test keeps killing, each time resuming from the greeting's mark
// (sometimes a little before it, to send duplicates and overlaps on purpose).
type firePublisher struct {
	id       string
	total    int64
	batch    int
	addr     func() string
	rng      *rand.Rand
	sessions int
	dups     int64
	acked    map[int64]int64 // offset → seq, from every ok reply
	progress atomic.Int64    // highest seq acknowledged
}

func (f *firePublisher) run(stop <-chan struct{}) error {
	f.acked = map[int64]int64{}
	for {
		select {
		case <-stop:
			return errors.New("stopped before publishing everything")
		default:
		}
		ws, g, err := dialRaw("ws://" + f.addr() + "/eo?publish&publisher=" + f.id)
		if err != nil {
			time.Sleep(20 * time.Millisecond) // the server is restarting
			continue
		}
		if g.Publisher == nil {
			ws.Close()
			return fmt.Errorf("greeting without a mark: %+v", g)
		}
		if g.Publisher.LastSeq < f.progress.Load() {
			ws.Close()
			return fmt.Errorf("greeting mark %+v is below seq %d, already acknowledged", g.Publisher, f.progress.Load())
		}
		if g.Publisher.LastSeq >= f.total {
			ws.Close()
			return nil
		}
		if g.Publisher.LastSeq > 0 && g.Publisher.LastOffset == wire.Null {
			ws.Close()
			return fmt.Errorf("mark %+v has no offset", g.Publisher)
		}
		f.sessions++
		next := g.Publisher.LastSeq + 1
		if f.rng.IntN(3) == 0 {
			next = max(1, next-int64(f.rng.IntN(3*f.batch))) // resend some on purpose
		}
		if err := f.session(ws, next, f.rng.IntN(40)+2); err != nil {
			return err
		}
	}
}

// session sends frames from seq next, pipelined, and kills the connection
// abruptly after budget frames (or ends when the server dies).
func (f *firePublisher) session(ws *websocket.Conn, next int64, budget int) error {
	type sent struct {
		seq int64
		n   int
	}
	inflight := make(chan sent, 32)
	replies := make(chan error, 1)
	go func() {
		defer close(replies)
		for s := range inflight {
			var r wire.Reply
			_, msg, err := ws.ReadMessage()
			if err != nil {
				for range inflight {
				}
				return
			}
			if err := wire.ParseReply(msg, &r); err != nil {
				replies <- err
				return
			}
			if r.Error != "" || len(r.OK) != s.n {
				replies <- fmt.Errorf("frame at seq %d: reply %s", s.seq, msg)
				return
			}
			if r.Duplicate {
				f.dups++
			}
			for i, o := range r.OK {
				if o != wire.Null {
					f.acked[o] = s.seq + int64(i)
				}
			}
			if last := s.seq + int64(s.n) - 1; last > f.progress.Load() {
				f.progress.Store(last)
			}
		}
	}()
	var err error
	for k := 0; k < budget && next <= f.total; k++ {
		n := int(min(int64(f.batch), f.total-next+1))
		if err = ws.WriteMessage(websocket.TextMessage, []byte(seqFrame(f.id, next, n))); err != nil {
			break
		}
		inflight <- sent{next, n}
		next += int64(n)
	}
	_ = ws.NetConn().Close() // abruptly: replies still owed are lost
	close(inflight)
	return <-replies
}

// TestExactlyOnceUnderFire: two publishers load seqs through connections the
// test kills abruptly, while the server is SIGKILLed and restarted; at the
// end the log holds each publisher's seqs exactly once, in order, and every
// offset a reply named holds the seq it was named for.
func TestExactlyOnceUnderFire(t *testing.T) {
	total, kills := int64(50000), 10 // per publisher: 100,000 rows in all
	if testing.Short() || raceEnabled {
		total, kills = 5000, 2
	}
	cfg := eoConfig(t)
	cfg.Streams = cfg.Streams[3:]
	ch := startChild(t, cfg)
	var addrMu sync.Mutex
	addr := ch.addr
	current := func() string {
		addrMu.Lock()
		defer addrMu.Unlock()
		return addr
	}

	pubs := []*firePublisher{
		{id: "fire-a", total: total, batch: 100, addr: current, rng: rand.New(rand.NewPCG(1, 2))},
		{id: "fire-b", total: total, batch: 37, addr: current, rng: rand.New(rand.NewPCG(3, 4))},
	}
	stop := make(chan struct{})
	errs := make(chan error, len(pubs))
	for _, p := range pubs {
		go func() { errs <- p.run(stop) }()
	}
	// The server is killed each time the load passes another 1/(kills+1)
	// of the rows, wherever the publishers are in their frames.
	deadline := time.After(90 * time.Second)
	finished := 0
	killed := 0
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for finished < len(pubs) {
		select {
		case err := <-errs:
			finished++
			if err != nil {
				close(stop)
				t.Fatal(err)
			}
			continue
		case <-deadline:
			close(stop)
			t.Fatal("the publishers did not finish in 90s")
		case <-tick.C:
		}
		done := int64(0)
		for _, p := range pubs {
			done += p.progress.Load()
		}
		if killed < kills && done >= int64(killed+1)*int64(len(pubs))*total/int64(kills+1) {
			if err := ch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-ch.done
			killed++
			ch = startChild(t, cfg)
			addrMu.Lock()
			addr = ch.addr
			addrMu.Unlock()
		}
	}
	rows := readLog(t, current())
	byOffset := map[int64]logged{}
	for _, r := range rows {
		byOffset[r.Offset] = r
	}
	for _, p := range pubs {
		checkSeqs(t, rows, p.id, p.total)
		for o, s := range p.acked {
			if r := byOffset[o]; r.Pub != p.id || r.Seq != s {
				t.Fatalf("%s: a reply named offset %d for seq %d, which holds %+v", p.id, o, s, r)
			}
		}
		t.Logf("%s: %d seqs in %d connections, %d duplicate replies", p.id, p.total, p.sessions, p.dups)
	}
	t.Logf("server killed %d times; the log holds %d rows", killed, len(rows))
}

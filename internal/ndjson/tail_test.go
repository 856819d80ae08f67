package ndjson

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/wire"

	"github.com/streamcast/streamcast/internal/testkit"
)

func dataFrame(o int64) string {
	return string(wire.AppendFrame(nil, o, 1790038800000000+o, []byte(`{"i":`+strconv.FormatInt(o, 10)+`}`)))
}

// replayServer greets with replay [start, end) (start from ?offset, or live
// at end) and sends the frames of that range, then runs after.
func replayServer(t *testing.T, end int64, after func(c *websocket.Conn)) string {
	return testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		start := end
		var replay *wire.Range
		if o := r.URL.Query().Get("offset"); o != "" {
			start, _ = strconv.ParseInt(o, 10, 64)
			replay = &wire.Range{Start: start, End: end}
		}
		testkit.SendText(t, c, greeting(end, replay))
		for o := start; o < end; o++ {
			testkit.SendText(t, c, dataFrame(o))
		}
		if after != nil {
			after(c)
		} else {
			testkit.CloseWithCode(c, wire.CloseNormal, "")
		}
	})
}

// untilClientCloses keeps a fake connection open (and silent) until the
// client closes it, or 5 s.
func untilClientCloses(c *websocket.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, _, err := c.NextReader(); err != nil {
			return
		}
	}
}

func TestTailWritesEachFrameExactlyAsReceived(t *testing.T) {
	frames := []string{`[1,5,{"a":1}]`, `[ 2 , 6 , {"a": [1, 2]} ]`, `[3,null,{"b":"x y"}]`}
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		testkit.SendText(t, c, greeting(4, &wire.Range{Start: 1, End: 4}))
		for _, f := range frames {
			testkit.SendText(t, c, f)
		}
		testkit.CloseWithCode(c, wire.CloseNormal, "")
	})
	var out bytes.Buffer
	res, err := Tail(ctxT(t), url+"/trades", &out, tailDefaults(TailOptions{Offset: wire.At(1)}))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(frames, "\n") + "\n"; out.String() != want {
		t.Errorf("output\n%s\nwant\n%s", out.String(), want)
	}
	if res.Rows != 3 || res.First != 1 || res.Last != 3 {
		t.Errorf("result %+v", res)
	}
}

func TestTailRowsPrintsOnlyTheRowObjects(t *testing.T) {
	url := replayServer(t, 3, nil)
	var out bytes.Buffer
	if _, err := Tail(ctxT(t), url+"/trades", &out, tailDefaults(TailOptions{Offset: wire.At(1), Rows: true})); err != nil {
		t.Fatal(err)
	}
	if out.String() != "{\"i\":1}\n{\"i\":2}\n" {
		t.Errorf("output %q", out.String())
	}
}

func TestTailCountStopsAfterNRows(t *testing.T) {
	url := replayServer(t, 100, func(c *websocket.Conn) { testkit.CloseWithCode(c, wire.CloseNormal, "") })
	var out bytes.Buffer
	res, err := Tail(ctxT(t), url+"/trades", &out, tailDefaults(TailOptions{Offset: wire.At(10), Count: 5}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.String(), "\n"); got != 5 || res.Last != 14 {
		t.Errorf("%d lines, last %d; want 5 lines ending at 14", got, res.Last)
	}
}

func TestTailUntilCaughtUpStopsAtTheGreetingsFrontier(t *testing.T) {
	// The server goes on sending live rows past the frontier; the tail
	// must stop at 9 without waiting for the close.
	url := replayServer(t, 10, func(c *websocket.Conn) {
		for o := int64(10); o < 20; o++ {
			testkit.SendText(t, c, dataFrame(o))
		}
		untilClientCloses(c)
	})
	var out bytes.Buffer
	start := time.Now()
	res, err := Tail(ctxT(t), url+"/trades", &out, tailDefaults(TailOptions{Offset: wire.At(5), UntilCaughtUp: true}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 5 || res.First != 5 || res.Last != 9 {
		t.Errorf("result %+v, want rows 5 to 9", res)
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("the tail waited for the server instead of stopping at the frontier")
	}
}

func TestTailUntilCaughtUpReturnsAtOnceWhenNothingIsReplayed(t *testing.T) {
	url := replayServer(t, 10, func(c *websocket.Conn) {
		testkit.SendText(t, c, dataFrame(10))
		untilClientCloses(c)
	})
	for _, opts := range []TailOptions{{UntilCaughtUp: true}, {UntilCaughtUp: true, Offset: wire.At(10)}} {
		var out bytes.Buffer
		start := time.Now()
		res, err := Tail(ctxT(t), url+"/trades", &out, tailDefaults(opts))
		if err != nil || res.Rows != 0 || out.Len() != 0 {
			t.Errorf("offset %v: rows %d, output %q, err %v; want nothing", opts.Offset, res.Rows, out.String(), err)
		}
		if time.Since(start) > 3*time.Second {
			t.Errorf("offset %v: the tail waited instead of returning at once", opts.Offset)
		}
	}
}

func TestTailUntilCaughtUpWithWhereFiltersOnTheClient(t *testing.T) {
	var query atomic.Value
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		query.Store(r.URL.RawQuery)
		g := wire.Greeting{Stream: "trades", EndOffset: 6, Replay: &wire.Range{Start: 1, End: 6}, Durable: true,
			Schema: []byte(`{"type":"object","properties":{"side":{"type":"integer"}},"required":["side"]}`)}
		testkit.SendText(t, c, string(g.AppendJSON(nil)))
		for o := int64(1); o < 6; o++ {
			testkit.SendText(t, c, fmt.Sprintf(`[%d,0,{"side":%d}]`, o, o%2))
		}
		untilClientCloses(c)
	})
	var out bytes.Buffer
	res, err := Tail(ctxT(t), url+"/trades", &out, tailDefaults(TailOptions{Offset: wire.At(1), UntilCaughtUp: true, Rows: true, Where: []byte(`{"side":1}`)}))
	if err != nil {
		t.Fatal(err)
	}
	if q := query.Load().(string); strings.Contains(q, "where") {
		t.Errorf("query %q: with --until-caught-up the filter runs here, so the replay's end is visible", q)
	}
	if out.String() != "{\"side\":1}\n{\"side\":1}\n{\"side\":1}\n" || res.Rows != 3 {
		t.Errorf("output %q (rows %d), want the three rows with side 1", out.String(), res.Rows)
	}
	if _, err := Tail(ctxT(t), url+"/trades", &out, tailDefaults(TailOptions{Offset: wire.At(1), UntilCaughtUp: true, Where: []byte(`{"nope":1}`)})); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("a filter on an unknown column: %v, want a refusal naming it", err)
	}
}

type logRecord struct{ msg, kv string }

type recordLogger struct {
	mu      sync.Mutex
	records []logRecord
}

func (l *recordLogger) add(msg any, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, logRecord{fmt.Sprint(msg), fmt.Sprint(kv...)})
}
func (l *recordLogger) Info(msg any, kv ...any) { l.add(msg, kv...) }
func (l *recordLogger) Warn(msg any, kv ...any) { l.add(msg, kv...) }

func TestTailReconnectResumesAfterTheLastRowOnTooSlowAndGoingAway(t *testing.T) {
	var conns atomic.Int32
	var offsets []string
	var mu sync.Mutex
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		n := conns.Add(1)
		mu.Lock()
		offsets = append(offsets, r.URL.Query().Get("offset"))
		mu.Unlock()
		start, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
		testkit.SendText(t, c, greeting(7, &wire.Range{Start: start, End: 7}))
		switch n {
		case 1: // two rows, then dropped as too slow with a trimmed reason
			testkit.SendText(t, c, dataFrame(1))
			testkit.SendText(t, c, dataFrame(2))
			testkit.CloseWithCode(c, wire.CloseTooSlow, `{"error":"too_slow"}`)
		case 2: // one row, then the server restarts
			testkit.SendText(t, c, dataFrame(3))
			testkit.CloseWithCode(c, wire.CloseGoingAway, "server shutting down")
		case 3: // the connection breaks without a close frame
			testkit.SendText(t, c, dataFrame(4))
			c.NetConn().Close()
		default:
			for o := start; o < 7; o++ {
				testkit.SendText(t, c, dataFrame(o))
			}
			testkit.CloseWithCode(c, wire.CloseNormal, "")
		}
	})
	var out bytes.Buffer
	log := &recordLogger{}
	res, err := Tail(ctxT(t), url+"/trades", &out, tailDefaults(TailOptions{Offset: wire.At(1), Reconnect: true, Logger: log, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for o := int64(1); o < 7; o++ {
		want.WriteString(dataFrame(o) + "\n")
	}
	if out.String() != want.String() {
		t.Errorf("output\n%s\nwant every row once\n%s", out.String(), want.String())
	}
	mu.Lock()
	if got := strings.Join(offsets, ","); got != "1,3,4,5" {
		t.Errorf("connections asked for offsets %s, want 1,3,4,5", got)
	}
	mu.Unlock()
	if res.Reconnects != 3 || len(log.records) != 3 {
		t.Errorf("%d reconnects, %d log records (%v); want 3 of each", res.Reconnects, len(log.records), log.records)
	}
}

func TestTailWithoutReconnectSaysHowToResume(t *testing.T) {
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		testkit.SendText(t, c, greeting(9, &wire.Range{Start: 1, End: 9}))
		testkit.SendText(t, c, dataFrame(1))
		testkit.SendText(t, c, dataFrame(2))
		testkit.CloseWithCode(c, wire.CloseTooSlow, `{"error":"too_slow","offset":3,"behind":8192}`)
	})
	var out bytes.Buffer
	_, err := Tail(ctxT(t), url+"/trades", &out, tailDefaults(TailOptions{Offset: wire.At(1)}))
	var te *TailError
	var ts *wire.TooSlow
	if !errors.As(err, &te) || !errors.As(err, &ts) {
		t.Fatalf("err %T %v, want a *TailError wrapping *wire.TooSlow", err, err)
	}
	for _, want := range []string{"--offset 3", "--reconnect", "8192"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if strings.Count(out.String(), "\n") != 2 {
		t.Errorf("the rows before the drop were not written: %q", out.String())
	}
}

func TestTailRefusalsSayWhatToRerunWith(t *testing.T) {
	tests := []struct {
		name   string
		code   int
		reason string
		want   []string
	}{
		{"too_old", wire.CloseNotReplayable, `{"error":"not_replayable","why":"too_old","offset":5,"end_offset":1000,"max_replay":100}`,
			[]string{"offset 5", "max_replay=100", "frontier 1000", "--offset 900", "--catch-up"}},
		{"evicted", wire.CloseNotReplayable, `{"error":"not_replayable","why":"evicted","offset":5,"earliest":50,"end_offset":1000}`,
			[]string{"offset 5", "below 50", "--offset earliest", "--catch-up"}},
		{"ahead", wire.CloseNotReplayable, `{"error":"not_replayable","why":"ahead","offset":5000,"end_offset":1000}`,
			[]string{"offset 5000", "past 1000", "--offset 1000"}},
		{"not_durable", wire.CloseNotReplayable, `{"error":"not_replayable","why":"not_durable"}`,
			[]string{"live-only", "without --offset"}},
		{"no such stream", wire.CloseNoSuchStream, `{"error":"no_such_stream","serves":["demo","quotes"]}`,
			[]string{`no stream "trades"`, `"demo", "quotes"`}},
		{"bad request", wire.CloseBadRequest, `{"error":"bad_request","detail":"where: column \"x\": no such column"}`,
			[]string{`column "x"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
				testkit.CloseWithCode(c, tt.code, tt.reason)
			})
			_, err := Tail(ctxT(t), url+"/trades", &bytes.Buffer{}, tailDefaults(TailOptions{Offset: wire.At(5), Reconnect: true}))
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("%q is more than one line", msg)
			}
		})
	}
}

func TestTailRefusalOfACursorsOffsetNamesTheCursor(t *testing.T) {
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		testkit.CloseWithCode(c, wire.CloseNotReplayable, `{"error":"not_replayable","why":"ahead","offset":43,"end_offset":10}`)
	})
	path := filepath.Join(t.TempDir(), "c")
	os.WriteFile(path, []byte("42"), 0o644)
	cur, _, _ := OpenCursor(path)
	_, err := Tail(ctxT(t), url+"/trades", &bytes.Buffer{}, tailDefaults(TailOptions{Cursor: cur}))
	if err == nil || !strings.Contains(err.Error(), "--cursor "+path) {
		t.Errorf("%v: want the message to say the offset came from the cursor", err)
	}
}

// failingWriter accepts ok writes, then fails every later one.
type failingWriter struct {
	mu   sync.Mutex
	ok   int
	got  bytes.Buffer
	gate chan struct{} // when set, the first write waits for it
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.gate != nil {
		<-w.gate
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ok == 0 {
		return 0, errors.New("disk full")
	}
	w.ok--
	w.got.Write(p)
	return len(p), nil
}

func TestTailCursorMovesOnlyPastLinesThatWereWritten(t *testing.T) {
	url := replayServer(t, 50001, nil)
	path := filepath.Join(t.TempDir(), "c")
	cur, _, _ := OpenCursor(path)
	w := &failingWriter{ok: 1, gate: make(chan struct{})}
	go func() {
		time.Sleep(50 * time.Millisecond) // let frames pile up behind the first write
		close(w.gate)
	}()
	_, err := Tail(ctxT(t), url+"/trades", w, tailDefaults(TailOptions{Offset: wire.At(1), Cursor: cur, BatchBytes: 64 << 10}))
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("err %v, want the write failure", err)
	}
	lines := strings.Split(strings.TrimSuffix(w.got.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	wantCursor := strings.TrimPrefix(strings.SplitN(last, ",", 2)[0], "[")
	if got := readCursorFile(t, path); got != wantCursor {
		t.Errorf("cursor %s, want %s: the offset of the last line written", got, wantCursor)
	}
	if len(lines) >= 50000 {
		t.Errorf("every line was written; the test did not exercise a failed write")
	}
}

func TestTailResumesOneAboveASavedCursorWhateverOffsetSaysAndResetMovesIt(t *testing.T) {
	var asked []string
	var mu sync.Mutex
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Query().Get("offset"))
		mu.Unlock()
		start, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
		testkit.SendText(t, c, greeting(100, &wire.Range{Start: start, End: 100}))
		for o := start; o < 100; o++ {
			testkit.SendText(t, c, dataFrame(o))
		}
		testkit.CloseWithCode(c, wire.CloseNormal, "")
	})
	path := filepath.Join(t.TempDir(), "c")
	os.WriteFile(path, []byte("9\n"), 0o644)
	run := func(opts TailOptions) (string, *recordLogger) {
		t.Helper()
		cur, _, err := OpenCursor(path)
		if err != nil {
			t.Fatal(err)
		}
		log := &recordLogger{}
		opts.Cursor, opts.Logger, opts.Count, opts.Rows = cur, log, 3, true
		var out bytes.Buffer
		if _, err := Tail(ctxT(t), url+"/trades", &out, tailDefaults(opts)); err != nil {
			t.Fatal(err)
		}
		return out.String(), log
	}

	if out, _ := run(TailOptions{}); out != "{\"i\":10}\n{\"i\":11}\n{\"i\":12}\n" || readCursorFile(t, path) != "12" {
		t.Errorf("output %q, cursor %s; want rows 10-12 and cursor 12", out, readCursorFile(t, path))
	}
	// The same command line run again (cron): the saved position wins
	// over --offset, and the tail says so once.
	out, log := run(TailOptions{Offset: wire.At(2)})
	if out != "{\"i\":13}\n{\"i\":14}\n{\"i\":15}\n" || readCursorFile(t, path) != "15" {
		t.Errorf("--offset 2 with a cursor at 12: output %q, cursor %s; want rows 13-15, cursor 15", out, readCursorFile(t, path))
	}
	if n := log.count("resuming after offset 12 saved in " + path + "; --offset applies only when no position is saved (move it with --reset-position)"); n != 1 {
		t.Errorf("the resume was said %d times, want once: %v", n, log.records)
	}
	// Reset moves the file back, before a row is written, and tails from there.
	if out, _ := run(TailOptions{Offset: wire.At(50), Reset: wire.At(2)}); out != "{\"i\":2}\n{\"i\":3}\n{\"i\":4}\n" || readCursorFile(t, path) != "4" {
		t.Errorf("Reset 2 with a cursor at 15: output %q, cursor %s; want rows 2-4, cursor 4", out, readCursorFile(t, path))
	}
	// Without a saved position, Offset decides.
	os.Remove(path)
	if out, _ := run(TailOptions{Offset: wire.At(50)}); out != "{\"i\":50}\n{\"i\":51}\n{\"i\":52}\n" || readCursorFile(t, path) != "52" {
		t.Errorf("--offset 50 with no cursor: output %q, cursor %s; want rows 50-52, cursor 52", out, readCursorFile(t, path))
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(asked, ",") != "10,13,2,50" {
		t.Errorf("asked offsets %v, want 10,13,2,50", asked)
	}
}

func TestTailStopsCleanlyWhenItsContextEnds(t *testing.T) {
	url := replayServer(t, 3, func(c *websocket.Conn) {
		untilClientCloses(c)
	})
	path := filepath.Join(t.TempDir(), "c")
	cur, _, _ := OpenCursor(path)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	res, err := Tail(ctx, url+"/trades", &out, tailDefaults(TailOptions{Offset: wire.At(1), Cursor: cur}))
	if err != nil || res.Rows != 2 {
		t.Fatalf("rows %d, err %v; want 2 rows and a clean stop", res.Rows, err)
	}
	if got := readCursorFile(t, path); got != "2" {
		t.Errorf("cursor %s after a stop, want 2 (saved on exit)", got)
	}
}

func TestTailSavesTheCursorOfAQuietStreamWithoutWaitingForMoreRows(t *testing.T) {
	url := testkit.FakeServer(t, func(t *testing.T, c *websocket.Conn, r *http.Request) {
		testkit.SendText(t, c, greeting(4, &wire.Range{Start: 1, End: 4}))
		testkit.SendText(t, c, dataFrame(1))
		time.Sleep(10 * time.Millisecond) // a second batch, inside the save throttle
		testkit.SendText(t, c, dataFrame(2))
		testkit.SendText(t, c, dataFrame(3))
		untilClientCloses(c)
	})
	path := filepath.Join(t.TempDir(), "c")
	cur, _, _ := OpenCursor(path)
	cur.every = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		_, err := Tail(ctx, url+"/trades", &out, tailDefaults(TailOptions{Offset: wire.At(1), Cursor: cur}))
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) == "3" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cursor never reached 3 while the tail waited for rows")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

package control_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/streamcast/streamcast/pkg/broker/control"
)

// A migration that fails leaves the stream serving on its old log: the
// operation ends failed naming the problem and the way out, publishers
// and subscribers go on at the same offsets, the declaration and the
// observed state still say the old schema, and the same migration, fixed,
// then succeeds.

// TestMigrationRefusedForATypeChangeServesOnTheOldLog: a schema that
// compiles but changes a column's type (which docs/design.md §6 forbids)
// is refused by the migration, not by the POST.
func TestMigrationRefusedForATypeChangeServesOnTheOldLog(t *testing.T) {
	f := start(t)
	// sym was a string; a migration may never make it an integer.
	bad := `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":"integer"}},"required":["id","sym"]}`
	checkFailedMigrationServesOn(t, f, bad, nil, `"sym"`)
}

// TestMigrationWhoseNewLogCannotBeMadeServesOnTheOldLog: a file planted
// where the new log's directory must go fails the migration.
func TestMigrationWhoseNewLogCannotBeMadeServesOnTheOldLog(t *testing.T) {
	f := start(t)
	planted := filepath.Join(f.root, "registered", "trades", "trades-v2")
	plant := func() {
		if err := os.WriteFile(planted, []byte("not a log"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fix := func() {
		if err := os.Remove(planted); err != nil {
			t.Fatal(err)
		}
	}
	checkFailedMigrationServesOn(t, f, "", plant, "trades-v2", fix)
}

// checkFailedMigrationServesOn runs the failing migration to schema bad
// (v2 with px added when bad is ""), after break, and checks that the
// stream serves on its old log; then, after fix, it retries with v2 and
// checks that it succeeds at the seam. want is a part of the error.
func checkFailedMigrationServesOn(t *testing.T, f *fixture, bad string, breakIt func(), want string, fix ...func()) {
	t.Helper()
	f.create(t, "trades")
	f.setDesired(t, "trades", "serving")
	publish(t, f.ws, "trades", 0, 5) // offsets 1–5
	sub := subscribe(t, f.ws, "trades", 0)
	sub.expect(t, 1, 5)

	id := f.streamID(t, "trades")
	v2 := `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":"string"},"px":{"type":["number","null"]}},"required":["id","sym"]}`
	if bad == "" {
		bad = v2
	}
	if breakIt != nil {
		breakIt()
	}
	before := f.do(t, req{"GET", "/control/v1/streams/trades", "", nil}).json(t)
	r := f.do(t, req{"POST", "/control/v1/streams/trades/migrations", `{"stream_id":"` + id + `","schema":` + bad + `}`, mut(f.etag(t, "trades"))})
	if r.status != http.StatusAccepted {
		t.Fatalf("migrate: %d %s", r.status, r.body)
	}
	op := f.waitEnd(t, r)
	msg, _ := op["error"].(string)
	if e, ok := op["error"].(map[string]any); ok {
		msg, _ = e["message"].(string)
	}
	if op["status"] != control.StatusFailed || !strings.Contains(msg, want) || !strings.Contains(msg, "POST the migration again") || !strings.Contains(msg, "serves on its old log") {
		t.Errorf("the failed migration's operation: %v; want failed, naming %s, the way out and that the stream serves on", op, want)
	}
	if strings.Contains(msg, f.root) {
		t.Errorf("the operation's error names a path: %s", msg)
	}

	got := f.do(t, req{"GET", "/control/v1/streams/trades", "", nil})
	g := got.json(t)
	obs := g["observed"].(map[string]any)
	rev := g["revision"].(float64)
	if g["desired"] != "serving" || obs["state"] != "serving" || obs["write_admission"] != true || obs["read_admission"] != true {
		t.Errorf("after the failed migration: desired %v, observed %v; want serving, serving with reads and writes", g["desired"], obs)
	}
	if obs["revision"] != rev || got.hdr.Get("ETag") != f.etag(t, "trades") || rev <= before["revision"].(float64) {
		t.Errorf("after the failed migration: revision %v (was %v), observed revision %v, ETag %s; want the revision the POST made, observed the same",
			rev, before["revision"], obs["revision"], got.hdr.Get("ETag"))
	}
	if d, _ := json.Marshal(g["declaration"].(map[string]any)["schema"]); !sameJSON(t, d, []byte(tradeSchema)) {
		t.Errorf("after the failed migration the declaration's schema is %s; want the old one", d)
	}
	if g["pending_operation"] != nil {
		t.Errorf("after the failed migration an operation is pending: %v", g["pending_operation"])
	}

	// The old log takes rows at the next offsets; the subscriber attached
	// across the failure gets them with no gap, and so does a new one.
	rep := publish(t, f.ws, "trades", 5, 8)
	if ok, _ := rep["ok"].([]any); len(ok) != 3 || ok[0].(float64) != 6 {
		t.Fatalf("a publish after the failed migration: %v; want offsets 6–8", rep)
	}
	sub.expect(t, 6, 8)
	fresh := subscribe(t, f.ws, "trades", 0)
	fresh.expect(t, 1, 8)

	for _, fx := range fix {
		fx()
	}
	r = f.do(t, req{"POST", "/control/v1/streams/trades/migrations", `{"stream_id":"` + id + `","schema":` + v2 + `}`, mut(f.etag(t, "trades"))})
	if r.status != http.StatusAccepted {
		t.Fatalf("the fixed migration: %d %s", r.status, r.body)
	}
	f.wait(t, r)
	rep = publish(t, f.ws, "trades", 8, 9)
	if ok, _ := rep["ok"].([]any); len(ok) != 1 || ok[0].(float64) != 9 {
		t.Errorf("after the fixed migration the next row got %v; want offset 9 (the seam)", rep)
	}
	sub.expect(t, 9, 9)
}

// waitEnd polls the operation an answer names until it ends, failed or
// not, and returns it.
func (f *fixture) waitEnd(t testing.TB, r resp) map[string]any {
	t.Helper()
	loc := r.hdr.Get("Location")
	deadline := time.Now().Add(30 * time.Second)
	for {
		op := f.do(t, req{"GET", loc, "", nil}).json(t)
		if op["status"] == control.StatusSucceeded || op["status"] == control.StatusFailed {
			return op
		}
		if time.Now().After(deadline) {
			t.Fatalf("operation still %v after 30s", op["status"])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func sameJSON(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// testSub is a subscriber read frame by frame.
type testSub struct {
	c *websocket.Conn
}

// subscribe attaches a subscriber to name from offset and reads its
// greeting; the test's cleanup closes it.
func subscribe(t testing.TB, ws, name string, offset int) *testSub {
	return subscribeQuery(t, ws, name, "offset="+itoa(offset))
}

func subscribeQuery(t testing.TB, ws, name, query string) *testSub {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(ws+"/"+name+"?"+query, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", name, err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, g, err := c.ReadMessage(); err != nil || !strings.Contains(string(g), `"streamcast"`) {
		t.Fatalf("subscribe %s?%s: %s %v", name, query, g, err)
	}
	return &testSub{c: c}
}

// next reads one data frame: its offset and row.
func (s *testSub) next(t testing.TB) (int64, map[string]any) {
	t.Helper()
	_ = s.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, b, err := s.c.ReadMessage()
	if err != nil {
		t.Fatalf("subscriber: %v", err)
	}
	var fr []json.RawMessage
	var off int64
	var row map[string]any
	if json.Unmarshal(b, &fr) != nil || len(fr) != 3 || json.Unmarshal(fr[0], &off) != nil || json.Unmarshal(fr[2], &row) != nil {
		t.Fatalf("subscriber: not a data frame: %s", b)
	}
	return off, row
}

// expect reads the rows at offsets [from, to], in order.
func (s *testSub) expect(t testing.TB, from, to int64) {
	t.Helper()
	for want := from; want <= to; want++ {
		if off, _ := s.next(t); off != want {
			t.Fatalf("subscriber got offset %d; want %d (of %d–%d)", off, want, from, to)
		}
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

package control_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/meta"
)

// TestStopClosesPublishersWith1001AndRefusesNewConnections: a stopped
// stream's open publisher is closed with 1001 after its acknowledged rows,
// a new connection is refused 4404, and the neighbour serves throughout.
// Started again, the stream resumes at the offset it stopped at.
func TestStopClosesPublishersWith1001AndRefusesNewConnections(t *testing.T) {
	f := start(t)
	f.create(t, "trades")
	f.setDesired(t, "trades", "serving")
	if rep := publish(t, f.ws, "trades", 0, 5); rep["ok"] == nil {
		t.Fatalf("publish: %v", rep)
	}
	c, _, err := websocket.DefaultDialer.Dial(f.ws+"/trades?publish", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, err := c.ReadMessage(); err != nil {
		t.Fatal(err)
	}
	f.setDesired(t, "trades", "stopped")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err = c.ReadMessage()
	if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != websocket.CloseGoingAway {
		t.Errorf("the open publisher got %v; want close 1001", err)
	}
	if code := refusedCode(t, f.ws, "trades"); code != 4404 {
		t.Errorf("a new connection to the stopped stream: close %d; want 4404", code)
	}
	if rep := publish(t, f.ws, "neighbour", 0, 1); rep["ok"] == nil {
		t.Errorf("the neighbour stopped serving: %v", rep)
	}
	f.setDesired(t, "trades", "serving")
	rep := publish(t, f.ws, "trades", 5, 6)
	// Offsets start at 1: rows 1–5 went before the stop.
	if ok, _ := rep["ok"].([]any); len(ok) != 1 || ok[0].(float64) != 6 {
		t.Errorf("after the restart the next row got %v; want offset 6", rep)
	}
}

// TestMigrationMovesTheStreamToANewLogAtTheSeam: a migration of a serving
// stream ends with the stream serving the new schema from exactly the old
// end, the declaration carrying it and the revision moved on.
func TestMigrationMovesTheStreamToANewLogAtTheSeam(t *testing.T) {
	f := start(t)
	f.create(t, "trades")
	f.setDesired(t, "trades", "serving")
	publish(t, f.ws, "trades", 0, 7)
	got := f.do(t, req{"GET", "/control/v1/streams/trades", "", nil}).json(t)
	id := got["stream_id"].(string)
	v2 := `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":"string"},"px":{"type":["number","null"]}},"required":["id","sym"]}`
	body := `{"stream_id":"` + id + `","schema":` + v2 + `,"sort_by":["id"]}`
	if r := f.do(t, req{"POST", "/control/v1/streams/trades/migrations", `{"stream_id":"other","schema":` + v2 + `}`, mut(f.etag(t, "trades"))}); r.status != http.StatusConflict {
		t.Errorf("a migration naming another stream id: %d %s", r.status, r.body)
	}
	r := f.do(t, req{"POST", "/control/v1/streams/trades/migrations", body, mut(f.etag(t, "trades"))})
	if r.status != http.StatusAccepted {
		t.Fatalf("migrate: %d %s", r.status, r.body)
	}
	f.wait(t, r)
	c, _, err := websocket.DefaultDialer.Dial(f.ws+"/trades?publish", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, g, err := c.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var greet struct {
		End    int64           `json:"end_offset"`
		Schema json.RawMessage `json:"schema"`
		ID     string          `json:"stream_id"`
	}
	_ = json.Unmarshal(g, &greet)
	// Rows 1–7 went before the migration: the new log starts at 8.
	if greet.End != 8 || greet.ID != id {
		t.Errorf("after the migration the greeting says end %d, id %s; want 8 (the seam), %s", greet.End, greet.ID, id)
	}
	_ = c.WriteMessage(websocket.TextMessage, []byte(`{"id":7,"sym":"x","px":1.5}`))
	_, b, err := c.ReadMessage()
	if err != nil || string(b) != `{"ok":[8]}` {
		t.Errorf("a row of the new schema: %s %v; want {\"ok\":[8]}", b, err)
	}
	after := f.do(t, req{"GET", "/control/v1/streams/trades", "", nil}).json(t)
	d := after["declaration"].(map[string]any)
	if props := d["schema"].(map[string]any)["properties"].(map[string]any); props["px"] == nil {
		t.Errorf("the declaration's schema after the migration: %v", d["schema"])
	}
}

// TestRetiredIsTerminalAndServedForReplay: a retired stream refuses
// publishers (4410), still greets subscribers, and refuses every other
// desired state.
func TestRetiredIsTerminalAndServedForReplay(t *testing.T) {
	f := start(t)
	f.create(t, "old")
	f.setDesired(t, "old", "serving")
	publish(t, f.ws, "old", 0, 3)
	f.setDesired(t, "old", "retired")
	c, _, err := websocket.DefaultDialer.Dial(f.ws+"/old?publish", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.ReadMessage()
	c.Close()
	if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != 4410 {
		t.Errorf("a publisher of the retired stream: %v; want 4410", err)
	}
	if code := refusedCode(t, f.ws, "old"); code != 0 {
		t.Errorf("a subscriber of the retired stream was refused %d; want a greeting", code)
	}
	r := f.do(t, req{"PUT", "/control/v1/streams/old/desired", `{"state":"serving"}`, mut(f.etag(t, "old"))})
	if r.status != http.StatusConflict || r.errCode() != "retired" {
		t.Errorf("serving a retired stream: %d %s", r.status, r.body)
	}
}

// TestRestartServesWhatWasServingAndNeverRecreatesABoundLog: after a
// restart the registered stream serves again from where it was; with its
// log deleted while the server was down, it is observed failed and no
// new log (no new identity) is made (I8).
func TestRestartServesWhatWasServingAndNeverRecreatesABoundLog(t *testing.T) {
	f := start(t)
	f.create(t, "trades")
	f.setDesired(t, "trades", "serving")
	publish(t, f.ws, "trades", 0, 4)
	f.stop()

	f = serve(t, f.root)
	rep := publish(t, f.ws, "trades", 4, 5)
	if ok, _ := rep["ok"].([]any); len(ok) != 1 || ok[0].(float64) != 5 {
		t.Fatalf("after a restart the next row got %v; want offset 5", rep)
	}
	f.stop()

	home := filepath.Join(f.root, "registered", "trades")
	if err := os.RemoveAll(home); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(f.root, "registered", meta.PublishedDir)); err != nil {
		t.Fatal(err)
	}
	f = serve(t, f.root)
	got := f.do(t, req{"GET", "/control/v1/streams/trades", "", nil}).json(t)
	if st := got["observed"].(map[string]any)["state"]; st != "failed" {
		t.Errorf("a bound stream whose log is gone is observed %v; want failed", st)
	}
	if _, err := os.Stat(home); err == nil {
		t.Errorf("%s was created afresh for a bound stream (I8)", home)
	}
	if code := refusedCode(t, f.ws, "trades"); code != 4404 {
		t.Errorf("the failed stream answered a connection with %d; want 4404", code)
	}
}

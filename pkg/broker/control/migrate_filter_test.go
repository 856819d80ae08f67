package control_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestSubscriberFiltersAreRecompiledAtTheSeam: a subscriber attached
// across an online migration keeps its where=, recompiled against the new
// schema. A filter on a kept column goes on matching the rows written
// after the seam, though a column added before it moved it; a filter on a
// column the migration removed closes its subscriber with 4400 naming
// the column and the seam.
func TestSubscriberFiltersAreRecompiledAtTheSeam(t *testing.T) {
	f := start(t)
	f.create(t, "trades")
	f.setDesired(t, "trades", "serving")
	onSym := subscribeQuery(t, f.ws, "trades", "where="+url.QueryEscape(`{"sym":"a"}`))
	onID := subscribeQuery(t, f.ws, "trades", "where="+url.QueryEscape(`{"id":[2,6]}`))

	publishRows(t, f.ws, "trades", `[{"id":1,"sym":"a"},{"id":2,"sym":"b"}]`, 1)
	if off, row := onSym.next(t); off != 1 || row["sym"] != "a" {
		t.Fatalf("where sym=a before the migration got %d %v; want offset 1", off, row)
	}
	if off, _ := onID.next(t); off != 2 {
		t.Fatalf("where id in [2,6] before the migration got %d; want offset 2", off)
	}

	// px comes before sym: sym moves from the second column to the third.
	v2 := `{"type":"object","properties":{"id":{"type":"integer"},"px":{"type":["number","null"]},"sym":{"type":"string"}},"required":["id","sym"]}`
	f.migrate(t, "trades", v2)
	publishRows(t, f.ws, "trades", `[{"id":3,"px":1.5,"sym":"b"},{"id":4,"px":2.5,"sym":"a"}]`, 3)
	if off, row := onSym.next(t); off != 4 || row["sym"] != "a" || row["px"] != 2.5 {
		t.Fatalf("where sym=a after the migration got %d %v; want offset 4, sym a, px 2.5", off, row)
	}

	// sym goes: the filter on it cannot hold; the one on id can.
	v3 := `{"type":"object","properties":{"id":{"type":"integer"},"px":{"type":["number","null"]}},"required":["id"]}`
	f.migrate(t, "trades", v3)
	_ = onSym.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, b, err := onSym.c.ReadMessage()
	ce, ok := err.(*websocket.CloseError)
	if !ok || ce.Code != 4400 || !strings.Contains(ce.Text, "offset 5") || !strings.Contains(ce.Text, `\"sym\"`) {
		t.Errorf("where sym=a after sym was removed: %s %v; want close 4400 naming offset 5 (the seam) and sym", b, err)
	}
	publishRows(t, f.ws, "trades", `[{"id":5,"px":null},{"id":6,"px":3.5}]`, 5)
	if off, row := onID.next(t); off != 6 || row["px"] != 3.5 {
		t.Errorf("where id in [2,6] after the second migration got %d %v; want offset 6", off, row)
	}
}

// migrate migrates name to schema and waits for the operation.
func (f *fixture) migrate(t testing.TB, name, schema string) {
	t.Helper()
	body := `{"stream_id":"` + f.streamID(t, name) + `","schema":` + schema + `}`
	r := f.do(t, req{"POST", "/control/v1/streams/" + name + "/migrations", body, mut(f.etag(t, name))})
	if r.status != http.StatusAccepted {
		t.Fatalf("migrate %s: %d %s", name, r.status, r.body)
	}
	f.wait(t, r)
}

// publishRows sends rows (a JSON array, one batch) to name and checks
// that they got the offsets from first on.
func publishRows(t testing.TB, ws, name, rows string, first int64) {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(ws+"/"+name+"?publish", nil)
	if err != nil {
		t.Fatalf("dial %s: %v", name, err)
	}
	defer c.Close()
	if _, _, err := c.ReadMessage(); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteMessage(websocket.TextMessage, []byte(rows)); err != nil {
		t.Fatal(err)
	}
	_, b, err := c.ReadMessage()
	var rep struct{ OK []int64 }
	if err != nil || json.Unmarshal(b, &rep) != nil || len(rep.OK) == 0 || rep.OK[0] != first {
		t.Fatalf("publish %s: %s %v; want offsets from %d", rows, b, err, first)
	}
}

package control_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/broker/control"
)

// TestANoOpRecordsNoOperationAndReceiptsArePruned: a no-op answers 200
// with no operation and stores only its receipt; receipts go after
// ReceiptRetention, finished operations after OperationRetention, and a
// retry past the retention is judged afresh.
func TestANoOpRecordsNoOperationAndReceiptsArePruned(t *testing.T) {
	f := start(t)
	f.create(t, "trades")
	for i := 0; i < 3; i++ {
		r := f.do(t, req{"PUT", "/control/v1/streams/trades", decl("create_if_absent"), mut(`"1"`)})
		if r.status != http.StatusOK || r.json(t)["operation_id"] != nil || r.hdr.Get("Location") != "/control/v1/streams/trades" || r.hdr.Get("ETag") != `"1"` {
			t.Fatalf("no-op %d: %d %v %s; want 200, no operation, the stream's Location and ETag", i, r.status, r.hdr, r.body)
		}
	}
	noop := req{"PUT", "/control/v1/streams/trades/desired", `{"state":"stopped"}`, mut(`"1"`)}
	if r := f.do(t, noop); r.status != http.StatusOK {
		t.Fatalf("desired no-op: %d %s", r.status, r.body)
	}
	f.stop()

	ctx := context.Background()
	cfg := serveConfig(f.root)
	reg, err := control.Open(ctx, cfg.RegistryPath())
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ops, receipts, err := control.Sizes(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}
	if ops != 1 || receipts != 5 {
		t.Errorf("after a create and 4 no-ops: %d operations and %d receipts; want 1 and 5", ops, receipts)
	}
	now := time.Now()
	if r, o, err := control.PruneAt(ctx, reg, now); err != nil || r+o != 0 {
		t.Errorf("prune now: %d receipts, %d operations, %v; want none", r, o, err)
	}
	if r, o, err := control.PruneAt(ctx, reg, now.Add(control.ReceiptRetention+time.Minute)); err != nil || r != 5 || o != 0 {
		t.Errorf("prune past the receipts' retention: %d receipts, %d operations, %v; want 5 and 0", r, o, err)
	}
	if r, o, err := control.PruneAt(ctx, reg, now.Add(control.OperationRetention+time.Minute)); err != nil || r != 0 || o != 1 {
		t.Errorf("prune past the operations' retention: %d receipts, %d operations, %v; want 0 and 1", r, o, err)
	}
}

// TestNamesThatDifferOnlyInCaseAreRefused: the control API refuses a
// name that differs only in case from a registered or a static stream, as
// the config loader does, naming the stream it clashes with.
func TestNamesThatDifferOnlyInCaseAreRefused(t *testing.T) {
	f := start(t)
	f.create(t, "c.one")
	for _, c := range []struct{ name, other string }{{"c.One", "c.one"}, {"C.ONE", "c.one"}, {"Neighbour", "neighbour"}} {
		r := f.do(t, req{"PUT", "/control/v1/streams/" + c.name, decl("create_if_absent"), mut("*")})
		if r.status != http.StatusConflict || r.errCode() != "name_differs_only_in_case" || !strings.Contains(string(r.body), `\"`+c.other+`\"`) {
			t.Errorf("create %s beside %s: %d %s; want 409 name_differs_only_in_case naming %s", c.name, c.other, r.status, r.body, c.other)
		}
	}
	if r := f.do(t, req{"PUT", "/control/v1/streams/c.two", decl("create_if_absent"), mut("*")}); r.status != http.StatusAccepted {
		t.Errorf("create c.two: %d %s", r.status, r.body)
	}
}

// TestListCursorsNameOnlyStreamsTheCallerSees: a page and its cursor are
// cut after the grant filter, so a cursor never names a stream the caller
// may not control, and following cursors lists every stream it may.
func TestListCursorsNameOnlyStreamsTheCallerSees(t *testing.T) {
	root := t.TempDir()
	cfg := opsAndDevConfig(t, root, "control")
	f := serveWith(t, cfg)
	as := func(user string, q req) resp {
		hr, _ := http.NewRequest("GET", "http://x", nil)
		hr.SetBasicAuth(user, "pw")
		if q.hdr == nil {
			q.hdr = map[string]string{}
		}
		q.hdr["Authorization"] = hr.Header.Get("Authorization")
		return f.do(t, q)
	}
	names := []string{"dev.a", "dev.b", "secret.x", "secret.y", "dev.c", "zeta.hidden"}
	for _, n := range names {
		if r := as("ops", req{"PUT", "/control/v1/streams/" + n, decl("create_if_absent"), mut("*")}); r.status != http.StatusAccepted {
			t.Fatalf("create %s: %d %s", n, r.status, r.body)
		}
	}
	var seen []string
	path := "/control/v1/streams?limit=1"
	for pages := 0; path != ""; pages++ {
		if pages > 10 {
			t.Fatalf("more than 10 pages of one stream for 3 streams: %v", seen)
		}
		r := as("dev", req{"GET", path, "", nil})
		p := r.json(t)
		for _, s := range p["streams"].([]any) {
			seen = append(seen, s.(map[string]any)["name"].(string))
		}
		path = ""
		if cur, ok := p["next_cursor"].(string); ok {
			if dec := decodeCursor(t, cur); strings.Contains(dec, "secret") || strings.Contains(dec, "zeta") {
				t.Errorf("dev's cursor %q reads %q: it names a stream dev may not see", cur, dec)
			}
			path = "/control/v1/streams?limit=1&cursor=" + cur
		}
	}
	if strings.Join(seen, ",") != "dev.a,dev.b,dev.c" {
		t.Errorf("dev's pages list %v; want dev.a, dev.b and dev.c", seen)
	}
}

// decodeCursor reads what a cursor carries, as anyone holding it can.
func decodeCursor(t testing.TB, cur string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(cur)
	if err != nil {
		return cur // opaque: it carries nothing readable
	}
	return string(b)
}

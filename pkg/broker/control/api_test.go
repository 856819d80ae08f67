package control_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/broker"
	"github.com/streamcast/streamcast/pkg/broker/control"
)

// TestEveryEndpointAnswersItsStatuses drives each endpoint over raw HTTP
// against a real server, through each success and refusal the contract
// names, in an order where each step's state is the previous step's.
func TestEveryEndpointAnswersItsStatuses(t *testing.T) {
	f := start(t)
	const s = "/control/v1/streams/trades"
	big := `{"schema":` + tradeSchema + `,"storage_profile":"local","sort_by":["` + strings.Repeat("x", 5000) + `"]}`
	steps := []struct {
		name   string
		q      req
		status int
		code   string
	}{
		{"root", req{"GET", "/control/v1", "", nil}, 200, ""},
		{"empty list", req{"GET", "/control/v1/streams", "", nil}, 200, ""},
		{"bad limit", req{"GET", "/control/v1/streams?limit=0", "", nil}, 400, "bad_request"},
		{"bad cursor", req{"GET", "/control/v1/streams?cursor=zzz", "", nil}, 400, "bad_request"},
		{"unknown stream", req{"GET", s, "", nil}, 404, "not_found"},
		{"unknown route", req{"GET", "/control/v1/nothing", "", nil}, 404, "not_found"},
		{"wrong method", req{"DELETE", s, "", nil}, 405, "method_not_allowed"},
		{"no content type", req{"PUT", s, decl("create_if_absent"), map[string]string{"Idempotency-Key": "a", "If-None-Match": "*"}}, 415, "unsupported_media_type"},
		{"no key", req{"PUT", s, decl("create_if_absent"), map[string]string{"Content-Type": "application/json", "If-None-Match": "*"}}, 428, "idempotency_key_required"},
		{"key with a space", req{"PUT", s, decl("create_if_absent"), map[string]string{"Content-Type": "application/json", "Idempotency-Key": "a b", "If-None-Match": "*"}}, 400, "bad_idempotency_key"},
		{"key too long", req{"PUT", s, decl("create_if_absent"), map[string]string{"Content-Type": "application/json", "Idempotency-Key": strings.Repeat("k", 129), "If-None-Match": "*"}}, 400, "bad_idempotency_key"},
		{"body over max_bytes", req{"PUT", s, big, mut("*")}, 413, "too_large"},
		{"malformed JSON", req{"PUT", s, `{"schema":`, mut("*")}, 400, "malformed_json"},
		{"duplicate key", req{"PUT", s, `{"schema":{},"schema":{}}`, mut("*")}, 400, "malformed_json"},
		{"non-finite number", req{"PUT", s, `{"max_replay":1e999}`, mut("*")}, 400, "malformed_json"},
		{"unknown key", req{"PUT", s, `{"schema":` + tradeSchema + `,"storage_profile":"local","root":"/etc"}`, mut("*")}, 400, "malformed_json"},
		{"unknown profile", req{"PUT", s, `{"schema":` + tradeSchema + `,"storage_profile":"elsewhere"}`, mut("*")}, 422, "unsupported_declaration"},
		{"no schema", req{"PUT", s, `{"storage_profile":"local"}`, mut("*")}, 422, "unsupported_declaration"},
		{"static name", req{"PUT", "/control/v1/streams/neighbour", decl("create_if_absent"), mut("*")}, 409, "static_stream"},
		{"create without precondition", req{"PUT", s, decl("create_if_absent"), mut("")}, 428, "precondition_required"},
		{"create with If-Match", req{"PUT", s, decl("create_if_absent"), mut(`"1"`)}, 412, "precondition_failed"},
		{"both preconditions", req{"PUT", s, decl("create_if_absent"), func() map[string]string { h := mut("*"); h["If-Match"] = `"1"`; return h }()}, 400, "bad_precondition"},
		{"create", req{"PUT", s, decl("create_if_absent"), mut("*")}, 202, ""},
		{"create again", req{"PUT", s, decl("create_if_absent"), mut("*")}, 412, "precondition_failed"},
		{"get", req{"GET", s, "", nil}, 200, ""},
		{"replace, no precondition", req{"PUT", s, decl("open_existing"), mut("")}, 428, "precondition_required"},
		{"replace, stale", req{"PUT", s, decl("open_existing"), mut(`"7"`)}, 412, "precondition_failed"},
		{"replace, malformed", req{"PUT", s, decl("open_existing"), mut(`W/"1"`)}, 412, "precondition_failed"},
		{"replace, no-op", req{"PUT", s, decl("create_if_absent"), mut(`"1"`)}, 200, ""},
		{"desired, bad state", req{"PUT", s + "/desired", `{"state":"paused"}`, mut(`"1"`)}, 422, "bad_state"},
		{"desired, unknown key", req{"PUT", s + "/desired", `{"state":"serving","x":1}`, mut(`"1"`)}, 400, "malformed_json"},
		{"desired, unknown stream", req{"PUT", "/control/v1/streams/nope/desired", `{"state":"serving"}`, mut(`"1"`)}, 404, "not_found"},
		{"desired, no-op", req{"PUT", s + "/desired", `{"state":"stopped"}`, mut(`"1"`)}, 200, ""},
		{"migrate an unbound stream", req{"POST", s + "/migrations", `{"stream_id":"x","schema":` + tradeSchema + `}`, mut(`"1"`)}, 409, "unbound"},
		{"retire a protected stream", req{"PUT", "/control/v1/streams/keep/desired", `{"state":"retired"}`, mut(`"1"`)}, 403, "protected"},
		{"serve", req{"PUT", s + "/desired", `{"state":"serving"}`, mut(`"1"`)}, 202, ""},
		{"list", req{"GET", "/control/v1/streams?limit=1", "", nil}, 200, ""},
		{"unknown operation", req{"GET", "/control/v1/operations/nope", "", nil}, 404, "not_found"},
	}
	for _, st := range steps {
		r := f.do(t, st.q)
		if r.status != st.status || r.errCode() != st.code {
			t.Errorf("%s: %d %q, want %d %q: %s", st.name, r.status, r.errCode(), st.status, st.code, r.body)
			continue
		}
		if r.status >= 400 {
			// Every refusal has the one error shape, and none names a path.
			m := r.json(t)
			e, ok := m["error"].(map[string]any)
			if !ok || e["message"] == "" || e["retryable"] == nil {
				t.Errorf("%s: error body %s is not {error:{code,message,retryable,operation_id}}", st.name, r.body)
			}
			if strings.Contains(string(r.body), f.root) {
				t.Errorf("%s: the error names the server's root: %s", st.name, r.body)
			}
		}
		if r.status == http.StatusAccepted {
			if r.hdr.Get("ETag") == "" || !strings.HasPrefix(r.hdr.Get("Location"), "/control/v1/operations/") {
				t.Errorf("%s: 202 without ETag or Location: %v", st.name, r.hdr)
			}
			f.wait(t, r)
		}
	}
	// The stream serves: a row published is acknowledged.
	if rep := publish(t, f.ws, "trades", 0, 3); rep["ok"] == nil {
		t.Fatalf("publish to the started stream: %v", rep)
	}
	got := f.do(t, req{"GET", s, "", nil}).json(t)
	obs := got["observed"].(map[string]any)
	if obs["state"] != "serving" || obs["write_admission"] != true || got["stream_id"] == nil {
		t.Errorf("observed after start: %v (stream_id %v)", obs, got["stream_id"])
	}
	// A non-schema change needs the stream stopped.
	if r := f.do(t, req{"PUT", s, strings.Replace(decl("open_existing"), `"exactly_once":true`, `"exactly_once":false`, 1), mut(f.etag(t, "trades"))}); r.status != 409 || r.errCode() != "not_stopped" {
		t.Errorf("replace while serving: %d %s", r.status, r.body)
	}
}

// TestTwoWritersOneETagOneWins: two mutations with the same If-Match race;
// exactly one is accepted and the other gets 412.
func TestTwoWritersOneETagOneWins(t *testing.T) {
	f := start(t)
	f.create(t, "race")
	for round := 0; round < 5; round++ {
		tag := f.etag(t, "race")
		state := []string{"serving", "stopped"}[round%2]
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i] = f.do(t, req{"PUT", "/control/v1/streams/race/desired", `{"state":"` + state + `"}`, mut(tag)}).status
			}()
		}
		wg.Wait()
		won, lost := 0, 0
		for _, s := range statuses {
			switch s {
			case http.StatusAccepted:
				won++
			case http.StatusPreconditionFailed:
				lost++
			}
		}
		if won != 1 || lost != 1 {
			t.Fatalf("round %d: statuses %v; want one 202 and one 412", round, statuses)
		}
	}
}

// TestIdenticalRetryGetsTheFirstAnswer: the same key and request answer
// what they answered the first time (status, body, Location), even after
// the ETag moved on; the same key with another request is 409.
func TestIdenticalRetryGetsTheFirstAnswer(t *testing.T) {
	f := start(t)
	h := mut("*")
	first := f.do(t, req{"PUT", "/control/v1/streams/idem", decl("create_if_absent"), h})
	if first.status != http.StatusAccepted {
		t.Fatalf("create: %d %s", first.status, first.body)
	}
	f.wait(t, first)
	f.setDesired(t, "idem", "serving") // the ETag moves on
	again := f.do(t, req{"PUT", "/control/v1/streams/idem", decl("create_if_absent"), h})
	if again.status != first.status || string(again.body) != string(first.body) || again.hdr.Get("Location") != first.hdr.Get("Location") {
		t.Errorf("retry: %d %s %s; want %d %s %s", again.status, again.body, again.hdr.Get("Location"), first.status, first.body, first.hdr.Get("Location"))
	}
	other := f.do(t, req{"PUT", "/control/v1/streams/idem", decl("open_existing"), h})
	if other.status != http.StatusConflict || other.errCode() != "idempotency_key_reused" {
		t.Errorf("another request under the key: %d %s", other.status, other.body)
	}
}

// TestPagesFollowTheCursorAndAMutationStalesIt: the list pages by name,
// the config file's streams among the registered ones; a mutation after a
// cursor was issued makes it 409.
func TestPagesFollowTheCursorAndAMutationStalesIt(t *testing.T) {
	f := start(t)
	for _, n := range []string{"a", "b", "c"} {
		f.create(t, n)
	}
	p1 := f.do(t, req{"GET", "/control/v1/streams?limit=2", "", nil}).json(t)
	if len(p1["streams"].([]any)) != 2 || p1["next_cursor"] == nil {
		t.Fatalf("first page: %v", p1)
	}
	cur := p1["next_cursor"].(string)
	// The config file's stream is listed among them, by name.
	p2 := f.do(t, req{"GET", "/control/v1/streams?limit=2&cursor=" + cur, "", nil}).json(t)
	if s := p2["streams"].([]any); len(s) != 2 || s[0].(map[string]any)["name"] != "c" || s[1].(map[string]any)["name"] != "neighbour" || p2["next_cursor"] != nil {
		t.Fatalf("second page: %v", p2)
	}
	f.create(t, "d")
	if r := f.do(t, req{"GET", "/control/v1/streams?limit=2&cursor=" + cur, "", nil}); r.status != http.StatusConflict {
		t.Errorf("a stale cursor: %d %s", r.status, r.body)
	}
}

// TestPastMaxPendingIs429WithRetryAfter: with max_pending operations in
// flight, the next mutation is refused 429, retryable, Retry-After: 1,
// and nothing of it is recorded; once the queue moves it is accepted.
func TestPastMaxPendingIs429WithRetryAfter(t *testing.T) {
	root := t.TempDir()
	cfg := serveConfig(root)
	cfg.Control.MaxPending = 1
	if _, err := control.Init(context.Background(), cfg.RegistryPath()); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	running := make(chan struct{}, 1)
	t.Cleanup(control.SetBeforeRun(func(string) {
		select {
		case running <- struct{}{}:
		default:
		}
		<-release
	})) // restored after the server's stop, which serveOpts registers later
	f := serveOpts(t, cfg, broker.Options{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the server's stop, which waits for the worker
	first := f.do(t, req{"PUT", "/control/v1/streams/a", decl("create_if_absent"), mut("*")})
	if first.status != http.StatusAccepted {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	<-running // the worker holds the operation: one in flight
	h := mut("*")
	r := f.do(t, req{"PUT", "/control/v1/streams/b", decl("create_if_absent"), h})
	if r.status != http.StatusTooManyRequests || r.hdr.Get("Retry-After") != "1" || r.json(t)["error"].(map[string]any)["retryable"] != true {
		t.Fatalf("past max_pending: %d %v %s; want 429, Retry-After: 1, retryable", r.status, r.hdr, r.body)
	}
	if g := f.do(t, req{"GET", "/control/v1/streams/b", "", nil}); g.status != http.StatusNotFound {
		t.Errorf("the refused stream was recorded: %d %s", g.status, g.body)
	}
	unblock()
	f.wait(t, first)
	if r := f.do(t, req{"PUT", "/control/v1/streams/b", decl("create_if_absent"), h}); r.status != http.StatusAccepted {
		t.Errorf("the retry under the same key once the queue moved: %d %s", r.status, r.body)
	}
}

// TestAClientGoneAfterSendingStillGetsItsChange: a client that sends a
// mutation and hangs up at once does not cancel it: the change commits.
func TestAClientGoneAfterSendingStillGetsItsChange(t *testing.T) {
	f := start(t)
	body := decl("create_if_absent")
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PUT /control/v1/streams/gone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nIdempotency-Key: gone-1\r\nIf-None-Match: *\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	_ = conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r := f.do(t, req{"GET", "/control/v1/streams/gone", "", nil}); r.status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the change of a client that hung up was not made")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package control_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/broker/control"
)

// TestReplayPublishedTrueIsTakenAndFalseRefusedSayingWhy: every replay
// here reads the published table, so replay_published: true declares
// what the stream does (and is no unknown key), while false, which the
// server cannot honour, is 422 naming the key and the way out.
func TestReplayPublishedTrueIsTakenAndFalseRefusedSayingWhy(t *testing.T) {
	f := start(t)
	body := func(v string) string {
		return `{"schema":` + tradeSchema + `,"storage_profile":"local","replay_published":` + v + `}`
	}
	r := f.do(t, req{"PUT", "/control/v1/streams/t.false", body("false"), mut("*")})
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "replay_published is false") || !strings.Contains(string(r.body), "max_replay") {
		t.Errorf("replay_published false: %d %s; want 422 naming replay_published and max_replay", r.status, r.body)
	}
	if r := f.do(t, req{"PUT", "/control/v1/streams/t.str", body(`"yes"`), mut("*")}); r.status != http.StatusUnprocessableEntity {
		t.Errorf(`replay_published "yes": %d %s; want 422`, r.status, r.body)
	}
	r = f.do(t, req{"PUT", "/control/v1/streams/t.true", body("true"), mut("*")})
	if r.status != http.StatusAccepted {
		t.Fatalf("replay_published true: %d %s; want 202", r.status, r.body)
	}
	f.wait(t, r)
	// The same declaration again, with or without the key, changes nothing.
	for _, b := range []string{body("true"), `{"schema":` + tradeSchema + `,"storage_profile":"local"}`} {
		if r := f.do(t, req{"PUT", "/control/v1/streams/t.true", b, mut(`"1"`)}); r.status != http.StatusOK {
			t.Errorf("the same declaration again (%s): %d %s; want 200, a no-op", b[len(b)-40:], r.status, r.body)
		}
	}
}

// TestLimitsOfZeroOrNullAre422NamingTheKey: a bound of 0 or null, or a
// limits of null, is refused with 422 naming it, never dropped for the
// server's bound, as are a negative one and a max_message_bytes over the
// server's (the checks of a config file's stream's limits:); a positive
// one is taken.
func TestLimitsOfZeroOrNullAre422NamingTheKey(t *testing.T) {
	f := start(t)
	for _, c := range []struct{ limits, want string }{
		{`{"max_backlog":0}`, "limits.max_backlog is 0"},
		{`{"max_inbound":null}`, "limits.max_inbound is null"},
		{`{"max_in_flight":-2}`, "limits.max_in_flight is -2"},
		{`null`, "limits is null"},
		{`{"max_message_bytes":99999999}`, "over the server's limits.max_message_bytes"},
	} {
		b := `{"schema":` + tradeSchema + `,"storage_profile":"local","limits":` + c.limits + `}`
		r := f.do(t, req{"PUT", "/control/v1/streams/lim", b, mut("*")})
		if r.status != http.StatusUnprocessableEntity || r.errCode() != "unsupported_declaration" || !strings.Contains(string(r.body), c.want) {
			t.Errorf("limits %s: %d %s; want 422 saying %q", c.limits, r.status, r.body, c.want)
		}
	}
	b := `{"schema":` + tradeSchema + `,"storage_profile":"local","limits":{"max_backlog":5}}`
	if r := f.do(t, req{"PUT", "/control/v1/streams/lim", b, mut("*")}); r.status != http.StatusAccepted {
		t.Errorf("limits max_backlog 5: %d %s; want 202", r.status, r.body)
	}
}

// TestTheConfigsStreamsAreShownAndNotChanged: GET of a stream of the
// config file shows it, marked "source": "config"; starting, stopping or
// migrating it is 409 saying it is the config's, and a name that is no
// stream at all is 404 saying so.
func TestTheConfigsStreamsAreShownAndNotChanged(t *testing.T) {
	f := start(t)
	r := f.do(t, req{"GET", "/control/v1/streams/neighbour", "", nil})
	if m := r.json(t); r.status != http.StatusOK || m["source"] != "config" || m["desired"] != "serving" || m["stream_id"] == nil {
		t.Errorf("GET neighbour: %d %s; want 200, source config, serving, its stream_id", r.status, r.body)
	}
	for _, q := range []req{
		{"PUT", "/control/v1/streams/neighbour/desired", `{"state":"stopped"}`, mut(`"1"`)},
		{"POST", "/control/v1/streams/neighbour/migrations", `{"stream_id":"x","schema":` + tradeSchema + `}`, mut(`"1"`)},
	} {
		if r := f.do(t, q); r.status != http.StatusConflict || r.errCode() != "static_stream" {
			t.Errorf("%s %s: %d %s; want 409 static_stream", q.method, q.path, r.status, r.body)
		}
	}
	r = f.do(t, req{"GET", "/control/v1/streams/nosuch", "", nil})
	if r.status != http.StatusNotFound || !strings.Contains(string(r.body), `stream \"nosuch\" does not exist`) {
		t.Errorf("GET nosuch: %d %s; want 404 saying it does not exist", r.status, r.body)
	}
}

// TestANameAtTheStatsPathIsRefused: with stats: /feed, a stream named
// feed would be served where the server serves its stats; its creation is
// 409 naming the stats: key.
func TestANameAtTheStatsPathIsRefused(t *testing.T) {
	root := t.TempDir()
	cfg := serveConfig(root)
	cfg.Stats = "/feed"
	if _, err := control.Init(context.Background(), cfg.RegistryPath()); err != nil {
		t.Fatal(err)
	}
	f := serveWith(t, cfg)
	r := f.do(t, req{"PUT", "/control/v1/streams/Feed", decl("create_if_absent"), mut("*")})
	if r.status != http.StatusConflict || r.errCode() != "stats_path" || !strings.Contains(string(r.body), "stats:") {
		t.Errorf("create Feed beside stats: /feed: %d %s; want 409 stats_path", r.status, r.body)
	}
}

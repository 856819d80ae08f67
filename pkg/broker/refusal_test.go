package broker

import (
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/wire"
)

func TestRefusalsCarryCodeAndReason(t *testing.T) {
	cfg := testConfig(t)
	mr := int64(5)
	cfg.Streams[0].MaxReplay = &mr
	srv := startServer(t, cfg)
	p := dialPublisher(t, srv, "trades")
	for i := 0; i < 10; i++ {
		p.roundTrip(trade(i))
	} // offsets 1..10, end 11

	cases := []struct {
		name   string
		path   string
		code   int
		reason []string // substrings of the close reason
	}{
		{"unknown parameter", "/trades?foo=1&bar", 4400, []string{`"error":"bad_request"`, "unknown query parameter(s): bar, foo"}},
		{"offset not an integer", "/trades?offset=abc", 4400, []string{`offset=\"abc\" is not an integer`}},
		{"offset with a plus sign", "/trades?offset=%2B5", 4400, []string{`offset=\"+5\" is not an integer`}},
		{"negative offset", "/trades?offset=-5", 4400, []string{"offset=-5 is negative"}},
		{"offset twice", "/trades?offset=1&offset=2", 4400, []string{"offset given more than once"}},
		{"publish with offset", "/trades?publish&offset=1", 4400, []string{"publish and offset are different requests"}},
		{"publish with where", "/trades?publish&where=%7B%7D", 4400, []string{"publish takes no where="}},
		{"publisher without publish", "/trades?publisher=a", 4400, []string{"publisher= needs publish"}},
		{"where not JSON", "/trades?where=nope", 4400, []string{"where must be a JSON object"}},
		{"where not an object", "/trades?where=%5B1%5D", 4400, []string{"where must be a JSON object"}},
		{"where unknown column", "/trades?where=%7B%22tikcer%22%3A1%7D", 4400, []string{"tikcer"}},
		{"unknown stream", "/nope", 4404, []string{`"error":"no_such_stream"`, `"serves":["live","raw","trades"]`}},
		{"exactly-once on a plain stream", "/trades?publish&publisher=p1", 4412, []string{`"why":"stream"`}},
		{"offset on a live-only stream", "/live?offset=1", 4416, []string{`"why":"not_durable"`}},
		{"offset ahead", "/trades?offset=12", 4416, []string{`"why":"ahead"`, `"offset":12`, `"end_offset":11`}},
		{"offset too old", "/trades?offset=2", 4416, []string{`"why":"too_old"`, `"offset":2`, `"end_offset":11`, `"max_replay":5`}},
		{"earliest too old", "/trades?offset=0", 4416, []string{`"why":"too_old"`, `"offset":0`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := dial(t, wsURL(srv, tc.path))
			code, reason := closeOf(err)
			if code != tc.code {
				t.Fatalf("%s: close %d %q (err %v), want %d", tc.path, code, reason, err, tc.code)
			}
			if len(reason) > wire.MaxReasonBytes {
				t.Errorf("reason is %d bytes, over %d", len(reason), wire.MaxReasonBytes)
			}
			for _, s := range tc.reason {
				if !strings.Contains(reason, s) {
					t.Errorf("%s: reason %s lacks %s", tc.path, reason, s)
				}
			}
			// The client library reads the same refusal into its typed error.
			if wire.ParseClose(code, reason) == nil {
				t.Errorf("wire.ParseClose(%d) = nil", code)
			}
		})
	}

	// At the frontier and within max_replay: served.
	for _, path := range []string{"/trades?offset=11", "/trades?offset=6", "/trades"} {
		_, g := mustDial(t, wsURL(srv, path))
		if g.EndOffset != 11 {
			t.Errorf("%s: end_offset %d, want 11", path, g.EndOffset)
		}
	}
}

func TestOversizedPublishFrameGets1009(t *testing.T) {
	cfg := testConfig(t)
	cfg.Limits.MaxMessageBytes = 1000
	srv := startServer(t, cfg)
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(trade(1)); r.Error != "" {
		t.Fatalf("small frame: %+v", r)
	}
	big := batch(0, 30) // > 1000 bytes
	if err := p.send(big); err != nil {
		t.Fatal(err)
	}
	_, err := p.reply()
	if code, reason := closeOf(err); code != 1009 || !strings.Contains(reason, "1000") {
		t.Fatalf("got %v, want close 1009 naming the limit", err)
	}
}

// TestResolveStartRefusesEveryWhy covers the decisions that need a log state
// the server cannot reach on its own (rows evicted by retention).
func TestResolveStartRefusesEveryWhy(t *testing.T) {
	req := func(o int64) offsetRequest { return offsetRequest{given: true, offset: o} }
	cases := []struct {
		name                         string
		req                          offsetRequest
		durable                      bool
		earliest, logEnd, front, max int64
		start                        int64
		replay                       bool
		why                          string
		logStart                     int64
		held                         heldRows
	}{
		{"live from the frontier", offsetRequest{}, true, 1, 1, 50, -1, 50, false, "", 1, heldRows{}},
		{"not durable", req(3), false, wire.Null, wire.Null, wire.Null, -1, 0, false, wire.WhyNotDurable, 1, heldRows{}},
		{"earliest on a log that never held a row", req(0), true, 1, 1, 1, 100, 1, true, "", 1, heldRows{}},
		{"earliest while the first commit lands", req(0), true, 1, 1, 3, 100, 1, true, "", 1, heldRows{}},
		{"earliest on a log whose rows all went", req(0), true, 40, 40, 40, 100, 0, false, wire.WhyEmpty, 1, heldRows{}},
		{"at the frontier", req(40), true, 1, 40, 40, 100, 40, true, "", 1, heldRows{}},
		{"ahead", req(41), true, 1, 40, 40, 100, 0, false, wire.WhyAhead, 1, heldRows{}},
		{"too old", req(5), true, 1, 200, 200, 100, 0, false, wire.WhyTooOld, 1, heldRows{}},
		{"unbounded replay", req(5), true, 1, 200, 200, -1, 5, true, "", 1, heldRows{}},
		{"evicted", req(5), true, 10, 40, 40, 100, 0, false, wire.WhyEvicted, 1, heldRows{}},
		{"earliest after eviction", req(0), true, 10, 40, 40, 100, 10, true, "", 1, heldRows{}},
		{"earliest on an empty log started at 500", req(0), true, 500, 500, 500, 100, 500, true, "", 500, heldRows{}},
		{"earliest on a log started at 500 whose rows all went", req(0), true, 600, 600, 600, 100, 0, false, wire.WhyEmpty, 500, heldRows{}},
		{"too old by distance, few rows held", req(5), true, 1, 200, 200, 100, 5, true, "", 1, heldRows{5, 200, 90}},
		{"too old by distance, rows committed since the count", req(5), true, 1, 200, 200, 100, 5, true, "", 1, heldRows{5, 190, 90}},
		{"too old by count once new rows are added", req(5), true, 1, 200, 200, 100, 0, false, wire.WhyTooOld, 1, heldRows{5, 180, 90}},
		{"too old by count", req(5), true, 1, 200, 200, 100, 0, false, wire.WhyTooOld, 1, heldRows{5, 200, 101}},
		{"a count of another window is not used", req(5), true, 1, 200, 200, 100, 0, false, wire.WhyTooOld, 1, heldRows{6, 200, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start, replay, nr := resolveStart(tc.req, tc.durable, extent{tc.earliest, tc.logEnd, tc.logStart}, tc.front, tc.max, tc.held)
			if tc.why != "" {
				if nr == nil || nr.Why != tc.why {
					t.Fatalf("got %+v, want refusal %s", nr, tc.why)
				}
				if len(nr.Reason()) > wire.MaxReasonBytes || !strings.Contains(nr.Reason(), tc.why) {
					t.Fatalf("reason %s", nr.Reason())
				}
				return
			}
			if nr != nil {
				t.Fatalf("refused %+v", nr)
			}
			if start != tc.start || replay != tc.replay {
				t.Fatalf("start %d replay %v, want %d %v", start, replay, tc.start, tc.replay)
			}
		})
	}
}

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
		{"offset too old", "/trades?offset=2", 4416, []string{`"why":"too_old"`, `"offset":2`, `"end_offset":11`, `"max_replay":5`, `"earliest":1}`}},
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

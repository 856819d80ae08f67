package broker

import (
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// TestFramesThatAreNotJSONSayWhereTheyStop: a publish frame that is not
// valid JSON is a bad_frame saying so, with the byte position, whatever its
// first byte makes it look like; the connection stays usable.
func TestFramesThatAreNotJSONSayWhereTheyStop(t *testing.T) {
	cfg := testConfig(t)
	eo := config.DefaultStream("eo")
	eo.Schema = config.RawJSON(config.DemoSchema)
	eo.ExactlyOnce = true
	cfg.Streams = append(cfg.Streams, eo)
	srv := startServer(t, cfg)
	cases := []struct {
		stream, frame, pos string
	}{
		{"trades", `not json`, "at byte 2 of 8"},
		{"trades", `{"a":`, "at byte 5 of 5"},
		{"trades", `{"event_ts":1,"symbol":"x",}`, "at byte 28 of 28"},
		{"trades", `[` + trade(1) + `, {"a":]`, "at byte"},
		{"trades", `nul`, "at byte 3 of 3"},
		{"raw", `not json`, "at byte 2 of 8"},
		{"raw", `{"a":`, "at byte 5 of 5"},
		{"eo?publish&publisher=p1", `[1, not json]`, "at byte 6 of 13"},
		{"eo?publish&publisher=p1", `[1, {"a":`, "at byte"},
		{"eo?publish&publisher=p1", `not json`, "at byte 2 of 8"},
	}
	pubs := map[string]*pubConn{}
	for _, c := range cases {
		p := pubs[c.stream]
		if p == nil {
			path := c.stream
			if !strings.Contains(path, "?") {
				path += "?publish"
			}
			ws, g := mustDial(t, wsURL(srv, "/"+path))
			p = &pubConn{t: t, ws: ws, g: g}
			pubs[c.stream] = p
		}
		r := p.roundTrip(c.frame)
		if r.Error != wire.ReplyBadFrame || !strings.Contains(r.Detail, "not valid JSON") || !strings.Contains(r.Detail, c.pos) {
			t.Errorf("%s: frame %s answered %+v, want bad_frame saying it is not valid JSON %s", c.stream, c.frame, r, c.pos)
		}
	}
	// Valid JSON that is no row still says what it is.
	p := pubs["trades"]
	if r := p.roundTrip(`null`); r.Error != wire.ReplyBadFrame || !strings.Contains(r.Detail, "is null") {
		t.Errorf("null: %+v", r)
	}
	if r := p.roundTrip(trade(1)); r.Error != "" {
		t.Fatalf("the connection is unusable after bad frames: %+v", r)
	}
}

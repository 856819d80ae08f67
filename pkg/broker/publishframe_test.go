package broker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/broker/config"
	"github.com/streamcast/streamcast/pkg/schema"
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

// FuzzPublishFrame feeds arbitrary frames to a publisher's decoder, plain
// and exactly-once. It must never panic, a frame that is not valid JSON
// (other than by its depth) is always a bad_frame saying so, and accepted rows are valid JSON.
func FuzzPublishFrame(f *testing.F) {
	for _, s := range []string{trade(1), batch(1, 3), `not json`, `{"a":`, `[1, not json]`, `[1,` + trade(2) + `]`, `nul`, `[]`, `"x"`} {
		f.Add([]byte(s))
	}
	sch, err := schema.Compile([]byte(config.DemoSchema))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, sc := range []*schema.Schema{sch, schema.Any()} {
			p := &publisher{st: &stream{sch: sc}}
			_, rows, code, detail := p.decodeFrame(nil, data, false)
			_, seqRows, seqCode, seqDetail := p.decodeFrame(nil, data, true)
			// JSON that encoding/json gives up on for its depth alone is
			// answered as too deep, not as "not JSON".
			if err := json.Unmarshal(data, new(json.RawMessage)); err != nil && !strings.HasSuffix(err.Error(), "exceeded max depth") {
				for _, got := range [][2]string{{code, detail}, {seqCode, seqDetail}} {
					if got[0] != wire.ReplyBadFrame || !strings.HasPrefix(got[1], notJSONPrefix) {
						t.Fatalf("invalid JSON %q answered %s %q", data, got[0], got[1])
					}
				}
			}
			for _, r := range append(rows, seqRows...) {
				if !json.Valid(r) {
					t.Fatalf("frame %q gave the row %q, which is not JSON", data, r)
				}
			}
		}
	})
}

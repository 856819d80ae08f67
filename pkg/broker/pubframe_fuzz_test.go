package broker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// tradeSchemaText is a tradeRow, the shape of the demo stream's schema
// (config.DemoSchema), written out here so that what this target decodes
// does not change when the demo stream's schema does.
const tradeSchemaText = `{"type":"object","properties":{
	"event_ts":{"type":"integer"},"symbol":{"type":"string"},"price":{"type":"number"},
	"amount":{"type":"number"},"side":{"type":"integer","format":"int32"},
	"trade_id":{"type":["string","null"]}},
	"required":["event_ts","symbol","price","amount","side"]}`

// tradeRow is a row of tradeSchemaText.
const tradeRow = `{"event_ts":1700000000000001,"symbol":"S1","price":1.5,"amount":1.0,"side":1}`

// FuzzPublishFrame feeds arbitrary frames to a publisher's decoder, plain
// and exactly-once. It must never panic, a frame that is not valid JSON
// (other than by its depth) is always a bad_frame saying so, and accepted rows are valid JSON.
func FuzzPublishFrame(f *testing.F) {
	for _, s := range []string{tradeRow, "[" + tradeRow + "," + tradeRow + "]", `not json`, `{"a":`, `[1, not json]`, `[1,` + tradeRow + `]`, `nul`, `[]`, `"x"`} {
		f.Add([]byte(s))
	}
	sch, err := schema.Compile([]byte(tradeSchemaText))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, sc := range []*schema.Schema{sch, schema.Any()} {
			d := &pubDecoder{Schema: sc}
			_, rows, code, detail := d.Decode(nil, data, false)
			_, seqRows, seqCode, seqDetail := d.Decode(nil, data, true)
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

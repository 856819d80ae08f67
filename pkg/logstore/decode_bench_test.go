package logstore

import (
	"encoding/json"
	"testing"
)

// record is a six-column trade file's statistics.
const record = `{"amount":[0.00012,0.006,0],"event_ts":[1735689600000000,1735689600274625,0],"price":[85565.12,85567.11,0],"side":[0,1,0],"symbol":["BTC-USD","XRP-USD",0],"trade_id":["700000000","700000199",0]}`

// BenchmarkDecode measures reading one file record's statistics, which a
// filtered scan does per file to prune.
func BenchmarkDecode(b *testing.B) {
	for b.Loop() {
		if _, err := Decode([]byte(record)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeBoundsOnly decodes the same record the way scans did
// before null counts (the first two elements only), for comparison.
func BenchmarkDecodeBoundsOnly(b *testing.B) {
	for b.Loop() {
		var m map[string][2]json.RawMessage
		if err := json.Unmarshal([]byte(record), &m); err != nil {
			b.Fatal(err)
		}
	}
}

package meta

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/schema"
)

func TestNewStreamIDIsARandomUUIDv4(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 100 {
		id, err := NewStreamID()
		if err != nil {
			t.Fatal(err)
		}
		if !re.MatchString(id) || seen[id] {
			t.Fatalf("NewStreamID = %q (seen before: %t)", id, seen[id])
		}
		seen[id] = true
	}
}

// TestMetadataJSONShape pins the keys other tools read.
func TestMetadataJSONShape(t *testing.T) {
	m, err := New("trades")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := schema.Compile([]byte(`{"type":"object","properties":{"sym":{"type":"string"},"n":{"type":["integer","null"],"format":"int32"}},"required":["sym"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddLog(Log{Name: "trades", Schema: sch.JSON(), Location: "file:///pub/trades/trades", StartOffset: 1}, sch); err != nil {
		t.Fatal(err)
	}
	m.Intent, err = NewIntent("migrate", map[string]any{"to": "trades-v2", "seam": 42})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.marshal()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"format", "version", "stream", "stream_id", "logs", "columns", "retirement", "retention", "intent"} {
		if _, ok := got[k]; !ok {
			t.Errorf("no %q in %s", k, b)
		}
	}
	for _, want := range []string{`"end_offset": null`, `"state": "live"`, `"first_ts": null`, `"stats": {}`, `"max_age": null`, `"floor": null`,
		`"pending_deletions": []`, `"kind": "migrate"`, `"seam": 42`, `"sym": "utf8"`, `"n": "int32"`, `"system_columns": [`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the JSON lacks %s:\n%s", want, b)
		}
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		To   string
		Seam int
	}
	if err := back.Intent.Decode(&in); err != nil || in.To != "trades-v2" || in.Seam != 42 {
		t.Fatalf("the intent reads back as %+v, %v", in, err)
	}
	again, err := back.marshal()
	if err != nil || string(again) != string(b) {
		t.Fatalf("the metadata does not read back to the same bytes:\n%s\n%s", b, again)
	}
}

func TestParseRefusesWhatNoWriterMakes(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"newer format", `{"format":2,"stream_id":"x"}`, "written by a newer streamcast"},
		{"no format", `{"stream_id":"x"}`, "no format number"},
		{"no id", `{"format":1}`, "no stream_id"},
		{"bad state", `{"format":1,"stream_id":"x","logs":[{"name":"a","state":"gone"}]}`, `state "gone"`},
		{"live log before another", `{"format":1,"stream_id":"x","logs":[{"name":"a","state":"live"},{"name":"b","state":"live"}]}`, "no end offset"},
		{"overlap", `{"format":1,"stream_id":"x","logs":[{"name":"a","state":"sealed","end_offset":10},{"name":"b","state":"live","start_offset":9}]}`, "below the end 10"},
		{"not JSON", `{`, "not valid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%s) = %v, want %q", tc.in, err, tc.want)
			}
		})
	}
}

// TestAColumnTypeNeverChanges: columns keep the first type they were
// declared with, even after removal; nullability may change.
func TestAColumnTypeNeverChanges(t *testing.T) {
	compile := func(s string) *schema.Schema {
		t.Helper()
		sch, err := schema.Compile([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return sch
	}
	m, _ := New("t")
	if err := m.DeclareColumns(compile(`{"type":"object","properties":{"a":{"type":"integer"},"s":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]}},"required":["a","s"]}`)); err != nil {
		t.Fatal(err)
	}
	// a removed, s made nullable (inner nullability too): allowed.
	if err := m.DeclareColumns(compile(`{"type":"object","properties":{"s":{"type":["object","null"],"properties":{"x":{"type":["string","null"]}}}}}`)); err != nil {
		t.Fatalf("nullability change refused: %v", err)
	}
	// a added back as int32: refused, naming both types.
	err := m.DeclareColumns(compile(`{"type":"object","properties":{"a":{"type":"integer","format":"int32"}},"required":["a"]}`))
	if err == nil || !strings.Contains(err.Error(), `column "a" was declared as int64 and is now declared as int32`) {
		t.Fatalf("int64 → int32: %v", err)
	}
	if m.Columns["a"] != "int64" {
		t.Fatalf("a refused declaration changed the record: %v", m.Columns)
	}
}

func TestCloneIsDeep(t *testing.T) {
	m, _ := New("t")
	end := int64(5)
	m.Logs = []Log{{Name: "t", State: Sealed, EndOffset: &end, SortBy: []string{"a"}}}
	c := m.Clone()
	*c.Logs[0].EndOffset = 9
	c.Logs[0].SortBy[0] = "b"
	c.Columns["x"] = "int64"
	if *m.Logs[0].EndOffset != 5 || m.Logs[0].SortBy[0] != "a" || len(m.Columns) != 0 {
		t.Fatalf("editing the clone changed the original: %+v", m)
	}
}

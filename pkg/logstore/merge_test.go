package logstore

import (
	"encoding/json"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamcast/streamcast/pkg/schema"
)

const testSchema = `{"type":"object","properties":{
	"n":{"type":"integer"},
	"s":{"type":["string","null"]},
	"z":{"type":["integer","null"]}},
	"required":["n"]}`

func mustSchema(t *testing.T) *schema.Schema {
	t.Helper()
	s, err := schema.Compile([]byte(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// nulls returns col's null count in cols, or -1 when unknown.
func nulls(cols map[string]Column, col string) int64 {
	c, ok := cols[col]
	if !ok || c.Nulls == nil {
		return -1
	}
	return *c.Nulls
}

func TestComputeCountsNullsAndKeepsBoundsOfNonNullValues(t *testing.T) {
	sch := mustSchema(t)
	mem := memory.NewGoAllocator()
	nb := array.NewInt64Builder(mem)
	nb.AppendValues([]int64{3, 1, 2}, nil)
	sb := array.NewStringBuilder(mem)
	sb.AppendValues([]string{"b", "", "a"}, []bool{true, false, true})
	zb := array.NewInt64Builder(mem)
	zb.AppendNulls(3)
	n, s, z := nb.NewArray(), sb.NewArray(), zb.NewArray()
	defer n.Release()
	defer s.Release()
	defer z.Release()
	enc, err := Compute(sch, []arrow.Array{n, s, z})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"n":[1,3,0],"s":["a","b",1],"z":[null,null,3]}`
	if string(enc) != want {
		t.Fatalf("Compute = %s; want %s", enc, want)
	}
}

func TestOldRecordsDecodeWithUnknownNullCounts(t *testing.T) {
	rec, err := Decode([]byte(`{"n":[1,3],"s":["a","b"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := rec.Column("n"); string(c.Min) != "1" || string(c.Max) != "3" || c.Nulls != nil {
		t.Fatalf("old record's n = %+v; want bounds [1,3], null count unknown", c)
	}
	if rec, err = Decode([]byte(`{"z":[null,null,4]}`)); err != nil {
		t.Fatal(err)
	}
	if c, _ := rec.Column("z"); c.HasBounds() || c.Nulls == nil || *c.Nulls != 4 {
		t.Fatalf("an all-null column reads as %+v; want no bounds, 4 nulls", c)
	}
	// An older reader keeps the first two elements: a null bound, which
	// it prunes by as "no statistics".
	var old map[string][2]json.RawMessage
	if err := json.Unmarshal([]byte(`{"n":[1,3,7]}`), &old); err != nil || string(old["n"][0]) != "1" || string(old["n"][1]) != "3" {
		t.Fatalf("an older reader reads %v (%v); want [1, 3]", old, err)
	}
}

func TestMergerSumsNullCountsOfDisjointParts(t *testing.T) {
	m := NewMerger(mustSchema(t))
	m.Add([]byte(`{"n":[5,9,0],"s":["b","c",2],"z":[null,null,3]}`))
	m.Add([]byte(`{"n":[1,4,0],"s":["a","a",5],"z":[null,null,1]}`))
	cols := m.Columns()
	if nulls(cols, "s") != 7 || nulls(cols, "z") != 4 || nulls(cols, "n") != 0 {
		t.Fatalf("merged null counts s %d, z %d, n %d; want 7, 4, 0", nulls(cols, "s"), nulls(cols, "z"), nulls(cols, "n"))
	}
	if c := cols["n"]; string(c.Min) != "1" || string(c.Max) != "9" {
		t.Fatalf("merged n bounds [%s, %s]; want [1, 9]", c.Min, c.Max)
	}
	if c := cols["z"]; c.HasBounds() {
		t.Fatalf("z has bounds %+v; an all-null column has none", c)
	}
	enc, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(enc)
	if c, _ := back.Column("s"); err != nil || c.Nulls == nil || *c.Nulls != 7 {
		t.Fatalf("Encode = %s, reads back %+v (%v)", enc, c, err)
	}
}

func TestMergerLeavesNullCountsUnknownWhenAPartHasNone(t *testing.T) {
	m := NewMerger(mustSchema(t))
	m.Add([]byte(`{"n":[5,9,0],"s":["b","c",2]}`))
	m.Add([]byte(`{"n":[1,4],"s":["a","a"]}`)) // written before null counts
	cols := m.Columns()
	if nulls(cols, "n") != -1 || nulls(cols, "s") != -1 {
		t.Fatalf("merged null counts n %d, s %d; want unknown (-1), never a guess", nulls(cols, "n"), nulls(cols, "s"))
	}
	if c := cols["n"]; string(c.Min) != "1" || string(c.Max) != "9" {
		t.Fatalf("merged n bounds [%s, %s]; want [1, 9] as before", c.Min, c.Max)
	}
	if _, ok := cols["z"]; ok {
		t.Fatalf("z merged as %+v; with neither bounds nor a count it is left out", cols["z"])
	}
}

func TestMergerCountsARecordHeldByTwoTiersOnce(t *testing.T) {
	part := func(s int) []byte {
		b, _ := json.Marshal(map[string]Column{"s": {Min: json.RawMessage(`"a"`), Max: json.RawMessage(`"b"`), Nulls: ptr(int64(s))}})
		return b
	}
	// A compacted local file [1,61) over its published inputs [1,31) and
	// [31,61), then a published file [61,71), in the order Summary reads.
	m := NewMerger(mustSchema(t))
	m.AddRecord(1, 61, part(10))
	m.AddRecord(1, 31, part(4))
	m.AddRecord(31, 61, part(6))
	m.AddRecord(61, 71, part(1))
	if got := nulls(m.Columns(), "s"); got != 11 {
		t.Fatalf("null count %d; want 11, each row counted once", got)
	}
	// A record that sticks out of the one before it cannot be split.
	m = NewMerger(mustSchema(t))
	m.AddRecord(1, 31, part(4))
	m.AddRecord(21, 61, part(6))
	if got := nulls(m.Columns(), "s"); got != -1 {
		t.Fatalf("null count %d over partly overlapping records; want unknown", got)
	}
}

func ptr[T any](v T) *T { return &v }

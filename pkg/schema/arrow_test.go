package schema

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestRandomRowsRoundTripThroughArrowByteIdentically is the property test
// of I4: for random schemas (nested structs, lists, maps, binary in both
// encodings, fixed-size binary, float32, nullable everything) and random
// rows written as a publisher might, JSON → canonical → Arrow → canonical is
// byte-identical, decoding canonical bytes changes nothing, and the three
// ways of evaluating a filter agree.
func TestRandomRowsRoundTripThroughArrowByteIdentically(t *testing.T) {
	schemas, rowsPer := 300, 40
	if testing.Short() {
		schemas = 40
	}
	g := &gen{rng: rand.New(rand.NewSource(4))}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for si := 0; si < schemas; si++ {
		tn := g.schema()
		doc := tn.doc()
		s, err := Compile([]byte(doc))
		if err != nil {
			t.Fatalf("schema %d: Compile(%s): %v", si, doc, err)
		}
		assertRoundTrips(t, s)

		rb := array.NewRecordBuilder(mem, s.Arrow())
		var canon [][]byte
		var r Row
		for ri := 0; ri < rowsPer; ri++ {
			in := g.row(tn)
			if err := s.Decode(&r, []byte(in)); err != nil {
				t.Fatalf("schema %s\nrow %s\nDecode: %v", doc, in, err)
			}
			c := append([]byte(nil), r.Canonical...)
			if !json.Valid(c) {
				t.Fatalf("canonical form is not JSON: %s", c)
			}
			if err := s.Decode(&r, c); err != nil || !bytes.Equal(r.Canonical, c) {
				t.Fatalf("schema %s\nrow %s\ncanonical %s\nre-decoded %s (%v)", doc, in, c, r.Canonical, err)
			}
			if err := s.AppendArrow(rb.Fields(), c); err != nil {
				t.Fatalf("schema %s\ncanonical %s\nAppendArrow: %v", doc, c, err)
			}
			canon = append(canon, c)
		}
		rec := rb.NewRecordBatch()
		rb.Release()
		if err := s.CheckArrow(rec.Columns()); err != nil {
			t.Fatal(err)
		}
		for i, c := range canon {
			if got := s.AppendJSON(nil, rec.Columns(), i); !bytes.Equal(got, c) {
				t.Fatalf("schema %s\nrow %d: Arrow gives back\n%s\nnot\n%s", doc, i, got, c)
			}
		}
		// A slice of the batch (non-zero offsets in every child) reads the same.
		sl := rec.NewSlice(3, int64(len(canon)))
		for i := range canon[3:] {
			if got := s.AppendJSON(nil, sl.Columns(), i); !bytes.Equal(got, canon[3+i]) {
				t.Fatalf("schema %s\nsliced row %d: %s, want %s", doc, i, got, canon[3+i])
			}
		}
		sl.Release()
		checkFiltersAgree(t, s, canon, rec)
		rec.Release()
	}
}

// checkFiltersAgree builds equality filters from values found in the rows
// and checks MatchRow, MatchCanonical and MatchArrow agree row by row, that
// the row the value came from matches, and that MayMatch never prunes a
// batch holding a match.
func checkFiltersAgree(t *testing.T, s *Schema, canon [][]byte, rec arrow.RecordBatch) {
	t.Helper()
	var r Row
	for col, c := range s.Columns() {
		n := s.root.fields[col]
		if !n.kind.scalar() {
			if _, err := s.CompileFilter([]byte(`{` + quote(c.Name) + `:1}`)); err == nil {
				t.Errorf("filter on %s column %q accepted", c.Type, c.Name)
			}
			continue
		}
		for src := 0; src < len(canon); src += 7 {
			if err := s.Decode(&r, canon[src]); err != nil {
				t.Fatal(err)
			}
			val := string(r.Value(col))
			where := `{` + quote(c.Name) + `:` + val + `}`
			if val == "null" && !c.Nullable {
				t.Fatalf("null in NOT NULL column: %s", canon[src])
			}
			f, err := s.CompileFilter([]byte(where))
			if err != nil {
				t.Fatalf("CompileFilter(%s): %v", where, err)
			}
			if again, err := s.CompileFilter(f.JSON()); err != nil || !bytes.Equal(again.JSON(), f.JSON()) {
				t.Fatalf("filter echo %s does not compile to itself (%v)", f.JSON(), err)
			}
			any := false
			for i, row := range canon {
				if err := s.Decode(&r, row); err != nil {
					t.Fatal(err)
				}
				a, b, c := f.MatchRow(&r), f.MatchCanonical(row), f.MatchArrow(rec.Columns(), i)
				if a != b || b != c {
					t.Fatalf("filter %s on %s: MatchRow %v, MatchCanonical %v, MatchArrow %v", where, row, a, b, c)
				}
				if i == src && !a {
					t.Fatalf("filter %s does not match the row it came from: %s", where, row)
				}
				any = any || a
			}
			if any && !f.MayMatch(minmaxOf(s, rec)) {
				t.Fatalf("MayMatch prunes a batch holding a match for %s", where)
			}
		}
	}
}

func minmaxOf(s *Schema, rec arrow.RecordBatch) func(string) ([]byte, []byte, bool) {
	return func(name string) ([]byte, []byte, bool) {
		col, ok := s.ColumnIndex(name)
		if !ok {
			return nil, nil, false
		}
		return s.MinMax(col, rec.Column(col))
	}
}

func TestAppendJSONMatchesDecodeForEveryType(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{
		"b":{"type":"boolean"},"i32":{"type":["integer","null"],"format":"int32"},"i64":{"type":"integer"},
		"f32":{"type":"number","format":"float"},"f64":{"type":["number","null"]},"s":{"type":"string"},
		"h":{"type":"string","contentEncoding":"base16"},"b64":{"type":["string","null"],"contentEncoding":"base64"},
		"id":{"type":"string","contentEncoding":"base16","format":"bytes2"},
		"st":{"type":["object","null"],"properties":{"x":{"type":["integer","null"]},"y":{"type":"array","items":{"type":["string","null"]}}},"required":["y"]},
		"l":{"type":["array","null"],"items":{"type":"object","additionalProperties":{"type":"number","format":"float"}}},
		"m":{"type":"object","additionalProperties":{"type":["string","null"],"contentEncoding":"base64"}}},
		"required":["b","i64","f32","s","h","id","m"]}`)
	rows := []string{
		`{"b":true,"i64":1,"f32":0.1,"s":"x","h":"","id":"ABCD","m":{}}`,
		`{"b":false,"i32":-5,"i64":-9223372036854775808,"f32":-3.4028235e38,"f64":1e-300,"s":"\"\u0000😀\n","h":"00FF","b64":"","id":"0000",
		  "st":{"y":[]},"l":[{},{"a":1.5,"b":-0}],"m":{"k":null,"\u00e9":"AQID"}}`,
		`{"b":true,"i32":null,"i64":7,"f32":1,"f64":null,"s":"","h":"aa","b64":null,"id":"ffff","st":null,"l":null,"m":{"":"AA=="}}`,
		`{"b":true,"i64":7,"f32":1e-7,"f64":-0.0,"s":"","h":"aa","id":"ffff","st":{"x":3,"y":["a",null]},"l":[],"m":{}}`,
	}
	rb := array.NewRecordBuilder(memory.NewGoAllocator(), s.Arrow())
	defer rb.Release()
	var want []string
	for _, in := range rows {
		c := decodeOK(t, s, in)
		want = append(want, c)
		if err := s.AppendArrow(rb.Fields(), []byte(c)); err != nil {
			t.Fatalf("AppendArrow(%s): %v", c, err)
		}
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	for i, w := range want {
		if got := string(s.AppendJSON(nil, rec.Columns(), i)); got != w {
			t.Errorf("row %d:\nArrow → %s\nDecode → %s", i, got, w)
		}
	}
}

func TestAppendArrowRefusesWhatIsNotCanonical(t *testing.T) {
	s := mustCompile(t, tradeSchema)
	rb := array.NewRecordBuilder(memory.NewGoAllocator(), s.Arrow())
	defer rb.Release()
	for _, c := range []string{
		``, `{}`, `[]`,
		`{"event_ts":1,"symbol":"x","price":1.0,"amount":1.0,"side":1}`,
		`{"symbol":"x","event_ts":1,"price":1.0,"amount":1.0,"side":1,"trade_id":"t"}`,
		`{"event_ts":1.5,"symbol":"x","price":1.0,"amount":1.0,"side":1,"trade_id":"t"}`,
		`{"event_ts":1,"symbol":"x","price":1.0,"amount":1.0,"side":9999999999,"trade_id":"t"}`,
		`{"event_ts":1,"symbol":"x","price":1.0,"amount":1.0,"side":1,"trade_id":"t"}x`,
		`{"event_ts":1,"symbol":"x`,
		`{"event_ts":1,"symbol":"x","price":1e999,"amount":1.0,"side":1,"trade_id":"t"}`,
	} {
		if err := s.AppendArrow(rb.Fields(), []byte(c)); err == nil {
			t.Errorf("AppendArrow accepted %q", c)
		}
	}
	if err := s.AppendArrow(rb.Fields()[:2], []byte(decodeOK(t, s, string(tradeRow(0))))); err == nil {
		t.Error("AppendArrow accepted too few builders")
	}
	other := array.NewRecordBuilder(memory.NewGoAllocator(), arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.BinaryTypes.String}, {Name: "b", Type: arrow.BinaryTypes.String}, {Name: "c", Type: arrow.BinaryTypes.String},
		{Name: "d", Type: arrow.BinaryTypes.String}, {Name: "e", Type: arrow.BinaryTypes.String}, {Name: "f", Type: arrow.BinaryTypes.String}}, nil))
	defer other.Release()
	if err := s.AppendArrow(other.Fields(), []byte(decodeOK(t, s, string(tradeRow(0))))); err == nil || !strings.Contains(err.Error(), "cannot hold") {
		t.Errorf("AppendArrow into builders of the wrong type: %v", err)
	}
	if err := Any().AppendArrow(nil, []byte(`{}`)); err == nil {
		t.Error("Any().AppendArrow accepted a row")
	}
}

func TestCheckArrowNamesTheMismatch(t *testing.T) {
	s := mustCompile(t, tradeSchema)
	rec, _ := tradeBatch(t, s, 2)
	defer rec.Release()
	if err := s.CheckArrow(rec.Columns()); err != nil {
		t.Fatal(err)
	}
	cols := append([]arrow.Array(nil), rec.Columns()...)
	cols[2], cols[4] = cols[4], cols[2]
	if err := s.CheckArrow(cols); err == nil || !strings.Contains(err.Error(), `"price"`) {
		t.Errorf("swapped columns: %v", err)
	}
	if err := s.CheckArrow(cols[:3]); err == nil {
		t.Error("too few columns accepted")
	}
}

func TestAppendJSONWritesValuesWithoutAJSONFormAsNull(t *testing.T) {
	s := mustCompile(t, one(`{"type":["number","null"]}`))
	b := array.NewFloat64Builder(memory.NewGoAllocator())
	b.AppendValues([]float64{math.NaN(), math.Inf(1), 2}, nil)
	arr := b.NewArray()
	defer arr.Release()
	for i, want := range []string{`{"c":null}`, `{"c":null}`, `{"c":2.0}`} {
		if got := string(s.AppendJSON(nil, []arrow.Array{arr}, i)); got != want {
			t.Errorf("row %d: %s, want %s", i, got, want)
		}
	}
	str := mustCompile(t, one(`{"type":"string"}`))
	sb := array.NewStringBuilder(memory.NewGoAllocator())
	sb.Append("a\xffb")
	sarr := sb.NewArray()
	defer sarr.Release()
	if got := string(str.AppendJSON(nil, []arrow.Array{sarr}, 0)); got != "{\"c\":\"a\uFFFDb\"}" {
		t.Errorf("invalid UTF-8 from Arrow: %q", got)
	}
	if got := string(str.AppendJSON(nil, []arrow.Array{arr}, 2)); got != `{"c":null}` {
		t.Errorf("an array of the wrong type: %s", got)
	}
}

func TestMinMax(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{
		"i":{"type":["integer","null"]},"f":{"type":["number","null"]},"s":{"type":["string","null"]},
		"h":{"type":["string","null"],"contentEncoding":"base16"},"b":{"type":["boolean","null"]},
		"l":{"type":["array","null"],"items":{"type":"integer"}},"n":{"type":["integer","null"]}},"required":[]}`)
	rb := array.NewRecordBuilder(memory.NewGoAllocator(), s.Arrow())
	defer rb.Release()
	for _, row := range []string{
		`{"i":5,"f":2.5,"s":"b","h":"ff","b":true,"l":[1]}`,
		`{"i":-3,"f":-0.5,"s":"ab","h":"00ff","b":true}`,
		`{}`,
		`{"i":12,"f":100,"s":"é","h":"01","b":true}`,
	} {
		if err := s.AppendArrow(rb.Fields(), []byte(decodeOK(t, s, row))); err != nil {
			t.Fatal(err)
		}
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	cases := []struct {
		col      int
		min, max string
		ok       bool
	}{
		{0, "-3", "12", true},
		{1, "-0.5", "100.0", true},
		{2, `"ab"`, `"é"`, true},
		{3, `"00ff"`, `"ff"`, true},
		{4, "true", "true", true},
		{5, "", "", false}, // a list
		{6, "", "", false}, // all null
	}
	for _, tc := range cases {
		lo, hi, ok := s.MinMax(tc.col, rec.Column(tc.col))
		if ok != tc.ok || string(lo) != tc.min || string(hi) != tc.max {
			t.Errorf("MinMax(%d) = %s, %s, %v; want %s, %s, %v", tc.col, lo, hi, ok, tc.min, tc.max, tc.ok)
		}
	}
	if _, _, ok := s.MinMax(0, rec.Column(1)); ok {
		t.Error("MinMax accepted an array of another type")
	}
	if _, _, ok := s.MinMax(99, rec.Column(1)); ok {
		t.Error("MinMax accepted a column out of range")
	}
	fb := array.NewFloat64Builder(memory.NewGoAllocator())
	fb.AppendValues([]float64{1, math.NaN()}, nil)
	nan := fb.NewArray()
	defer nan.Release()
	if _, _, ok := s.MinMax(1, nan); ok {
		t.Error("MinMax of a column holding NaN")
	}
}

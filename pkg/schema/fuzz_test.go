package schema

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// fuzzSchema has a column of every kind, nested, so decode paths all run.
const fuzzSchema = `{"type":"object","properties":{
	"i":{"type":"integer"},"i32":{"type":["integer","null"],"format":"int32"},
	"f":{"type":["number","null"]},"f32":{"type":["number","null"],"format":"float"},
	"b":{"type":["boolean","null"]},"s":{"type":["string","null"]},
	"h":{"type":["string","null"],"contentEncoding":"base16"},"b64":{"type":["string","null"],"contentEncoding":"base64"},
	"id":{"type":["string","null"],"contentEncoding":"base16","format":"bytes4"},
	"st":{"type":["object","null"],"properties":{"a":{"type":"integer"},"z":{"type":["string","null"]}},"required":["a"]},
	"l":{"type":["array","null"],"items":{"type":["number","null"]}},
	"m":{"type":["object","null"],"additionalProperties":{"type":"array","items":{"type":"string"}}}},
	"required":["i"]}`

// FuzzDecode feeds arbitrary bytes to Decode. It must never panic, and what
// it accepts must be valid JSON whose canonical form is stable and survives
// Arrow byte-identically.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"i":1}`))
	f.Add([]byte(`{"i":1,"f":1.5,"s":"\u00e9","st":{"a":2},"l":[1,null],"m":{"k":["v"]}}`))
	s := mustCompile(f, fuzzSchema)
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Row
		err := s.Decode(&r, data)
		out, err2 := s.AppendCanonical(nil, data)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("Decode err %v, AppendCanonical err %v", err, err2)
		}
		var anyRow Row
		if Any().Decode(&anyRow, data) == nil && !json.Valid(data) {
			t.Fatalf("Any accepted invalid JSON %q", data)
		}
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		c := append([]byte(nil), r.Canonical...)
		if !bytes.Equal(c, out) || !json.Valid(c) {
			t.Fatalf("canonical %q, AppendCanonical %q", c, out)
		}
		if err := s.Decode(&r, c); err != nil || !bytes.Equal(r.Canonical, c) {
			t.Fatalf("re-decoding %q gave %q, %v", c, r.Canonical, err)
		}
		rb := array.NewRecordBuilder(memory.NewGoAllocator(), s.Arrow())
		defer rb.Release()
		if err := s.AppendArrow(rb.Fields(), c); err != nil {
			t.Fatalf("AppendArrow(%q): %v", c, err)
		}
		rec := rb.NewRecordBatch()
		defer rec.Release()
		if got := s.AppendJSON(nil, rec.Columns(), 0); !bytes.Equal(got, c) {
			t.Fatalf("through Arrow %q became %q", c, got)
		}
	})
}

// FuzzCompileFilter feeds arbitrary where= text to CompileFilter, with and
// without a schema. It must never panic; an accepted filter's echo compiles
// to itself and its match methods agree.
func FuzzCompileFilter(f *testing.F) {
	f.Add([]byte(`{"i":1}`))
	f.Add([]byte(`{"s":["a",null],"h":"ABCD","f":0}`))
	s := mustCompile(f, fuzzSchema)
	rows := []string{
		`{"i":1}`,
		`{"i":0,"i32":5,"f":-0.0,"f32":0.5,"b":true,"s":"a","h":"abcd","b64":"AAE=","id":"00000000","st":{"a":1},"l":[],"m":{}}`,
		`{"i":-7,"f":1e300,"s":"\u00e9","h":"","id":"ffffffff"}`,
	}
	rb := array.NewRecordBuilder(memory.NewGoAllocator(), s.Arrow())
	var canon [][]byte
	var r Row
	for _, row := range rows {
		if err := s.Decode(&r, []byte(row)); err != nil {
			f.Fatal(err)
		}
		c := append([]byte(nil), r.Canonical...)
		canon = append(canon, c)
		if err := s.AppendArrow(rb.Fields(), c); err != nil {
			f.Fatal(err)
		}
	}
	rec := rb.NewRecordBatch()
	rb.Release()
	f.Fuzz(func(t *testing.T, where []byte) {
		for _, sch := range []*Schema{s, Any()} {
			flt, err := sch.CompileFilter(where)
			if err != nil {
				continue
			}
			again, err := sch.CompileFilter(flt.JSON())
			if err != nil || !bytes.Equal(again.JSON(), flt.JSON()) {
				t.Fatalf("echo %q of %q does not compile to itself: %v", flt.JSON(), where, err)
			}
			var r Row
			for i, c := range canon {
				if err := sch.Decode(&r, c); err != nil {
					t.Fatal(err)
				}
				a, b := flt.MatchRow(&r), flt.MatchCanonical(c)
				if a != b {
					t.Fatalf("%q on %q: MatchRow %v, MatchCanonical %v", where, c, a, b)
				}
				if !sch.IsAny() && flt.MatchArrow(rec.Columns(), i) != a {
					t.Fatalf("%q on %q: MatchArrow disagrees", where, c)
				}
			}
			flt.MayMatch(minmaxOf(s, rec))
		}
	})
}

// FuzzCompile feeds arbitrary documents to Compile. It must never panic,
// and an accepted schema round-trips through JSON() and Arrow().
func FuzzCompile(f *testing.F) {
	f.Add([]byte(tradeSchema))
	f.Add([]byte(fuzzSchema))
	f.Fuzz(func(t *testing.T, doc []byte) {
		s, err := Compile(doc)
		if err != nil || s.IsAny() {
			return
		}
		assertRoundTrips(t, s)
		var r Row
		_ = s.Decode(&r, doc)
	})
}

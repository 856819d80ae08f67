package schema

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const filterSchema = `{"type":"object","properties":{
	"sym":{"type":"string"},"side":{"type":"integer","format":"int32"},"px":{"type":"number"},"q":{"type":["number","null"],"format":"float"},
	"ok":{"type":["boolean","null"]},"id":{"type":"string","contentEncoding":"base16","format":"bytes2"},"b64":{"type":["string","null"],"contentEncoding":"base64"},
	"tag":{"type":["string","null"]},"n":{"type":"integer"},
	"res":{"type":["object","null"],"properties":{"a":{"type":"integer"}},"required":["a"]},
	"tags":{"type":["array","null"],"items":{"type":"string"}},"attrs":{"type":["object","null"],"additionalProperties":{"type":"string"}}},
	"required":["sym","side","px","id","n"]}`

func TestCompileFilterRefuses(t *testing.T) {
	s := mustCompile(t, filterSchema)
	cases := []struct {
		where, column string
		want          []string
	}{
		{`{"tikcer":"x"}`, "tikcer", []string{"no such column", "declared: sym, side"}},
		{`{"sym":{"eq":"x"}}`, "sym", []string{"is an object", "a scalar, or a list of scalars"}},
		{`{"sym":[]}`, "sym", []string{"empty list"}},
		{`{"sym":["a",["b"]]}`, "sym", []string{"holds an array, which is not a scalar"}},
		{`{"res":1}`, "res", []string{"struct", "scalar columns only"}},
		{`{"tags":"a"}`, "tags", []string{"list", "scalar columns only"}},
		{`{"attrs":"a"}`, "attrs", []string{"map", "scalar columns only"}},
		{`{"n":"abc"}`, "n", []string{`holds integer values, so a string "abc" would match nothing`}},
		{`{"n":1.5}`, "n", []string{"1.5 is not an integer"}},
		{`{"side":3000000000}`, "side", []string{"out of range", "int32"}},
		{`{"px":"1"}`, "px", []string{"number values", `a string "1"`}},
		{`{"px":1e400}`, "px", []string{"out of range"}},
		{`{"q":1e39}`, "q", []string{"out of range", "float32"}},
		{`{"sym":1}`, "sym", []string{"string values", "a number 1"}},
		{`{"ok":1}`, "ok", []string{"boolean values"}},
		{`{"id":"zz00"}`, "id", []string{"not valid base16"}},
		{`{"id":"00"}`, "id", []string{"1 bytes", "exactly 2"}},
		{`{"b64":"abc"}`, "b64", []string{"not valid base64"}},
		{`{"sym":null}`, "sym", []string{"never null", `"string"`}},
		{`{"n":[1,null]}`, "n", []string{"never null"}},
		{`[1]`, "", []string{"a filter is a JSON object"}},
		{`{"sym":"a"`, "", []string{"invalid JSON"}},
		{`{"sym":"a","sym":"b"}`, "", []string{"appears twice"}},
		{`null`, "", []string{"a filter is a JSON object"}},
	}
	for _, tc := range cases {
		t.Run(tc.where, func(t *testing.T) {
			f, err := s.CompileFilter([]byte(tc.where))
			if err == nil {
				t.Fatalf("accepted: %s", f.JSON())
			}
			var fe *FilterError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T %v is not a *FilterError", err, err)
			}
			if fe.Column != tc.column {
				t.Errorf("Column = %q, want %q (%v)", fe.Column, tc.column, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestFilterErrorReadsAsASentence(t *testing.T) {
	_, err := mustCompile(t, filterSchema).CompileFilter([]byte(`{"tikcer":"BTC"}`))
	want := `where: column "tikcer": this stream has no such column (declared: sym, side, px, q, ok, id, b64, tag, n, res, tags, attrs)`
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

func TestEmptyFiltersMatchEverything(t *testing.T) {
	s := mustCompile(t, filterSchema)
	for _, where := range []string{"", " ", "{}", " { } "} {
		f, err := s.CompileFilter([]byte(where))
		if err != nil {
			t.Fatalf("CompileFilter(%q): %v", where, err)
		}
		if !f.All() || string(f.JSON()) != "{}" || !f.MatchCanonical([]byte(`{"x":1}`)) || !f.MayMatch(nil) {
			t.Errorf("CompileFilter(%q) restricts something", where)
		}
	}
	f, err := s.CompileFilter(nil)
	if err != nil || !f.All() {
		t.Fatalf("nil: %v", err)
	}
	// A Row whose last Decode failed matches nothing, and does not panic.
	var r Row
	g, _ := s.CompileFilter([]byte(`{"n":1}`))
	if err := s.Decode(&r, []byte(`{"n":"x"}`)); err == nil || g.MatchRow(&r) {
		t.Error("a refused row matched a filter")
	}
	var none *Filter
	if !none.All() || string(none.JSON()) != "{}" || !none.MatchRow(&Row{}) || !none.MatchCanonical(nil) || !none.MatchArrow(nil, 0) || !none.MayMatch(nil) {
		t.Error("a nil *Filter restricts something")
	}
}

func TestFilterJSONIsACanonicalEcho(t *testing.T) {
	s := mustCompile(t, filterSchema)
	cases := []struct{ where, want string }{
		{`{"n":1e2,"sym":"BTC"}`, `{"sym":"BTC","n":100}`},
		{`{"px":[85565, 1.50, 85565.0]}`, `{"px":[85565.0,1.5]}`},
		{`{"id":"ABCD","tag":[null,"\u00e9"]}`, `{"id":"abcd","tag":["é",null]}`},
		{`{"ok":[true]}`, `{"ok":true}`},
		{`{"q":0.1}`, `{"q":0.1}`},
	}
	for _, tc := range cases {
		f, err := s.CompileFilter([]byte(tc.where))
		if err != nil {
			t.Fatalf("%s: %v", tc.where, err)
		}
		if got := string(f.JSON()); got != tc.want {
			t.Errorf("JSON(%s) = %s, want %s", tc.where, got, tc.want)
		}
	}
}

func TestFilterMatchesByTypedEquality(t *testing.T) {
	s := mustCompile(t, filterSchema)
	rows := []string{
		`{"sym":"BTC","side":1,"px":85565,"q":0.5,"ok":true,"id":"ABCD","b64":"AAE=","n":1}`,
		`{"sym":"ETH","side":0,"px":-0.0,"id":"0000","tag":"é","n":2,"res":{"a":1},"tags":["x"]}`,
		`{"sym":"BTC","side":0,"px":0.1,"q":null,"ok":false,"id":"abcd","n":3}`,
	}
	cases := []struct {
		where string
		want  []bool
	}{
		{`{"sym":"BTC"}`, []bool{true, false, true}},
		{`{"sym":["ETH","SOL"]}`, []bool{false, true, false}},
		{`{"sym":"BTC","side":0}`, []bool{false, false, true}},
		{`{"px":85565}`, []bool{true, false, false}},
		{`{"px":0}`, []bool{false, true, false}},
		{`{"px":-0.0}`, []bool{false, true, false}},
		{`{"px":0.1}`, []bool{false, false, true}},
		{`{"q":0.5}`, []bool{true, false, false}},
		{`{"q":null}`, []bool{false, true, true}},
		{`{"tag":null}`, []bool{true, false, true}},
		{`{"tag":"\u00e9"}`, []bool{false, true, false}},
		{`{"ok":false}`, []bool{false, false, true}},
		{`{"ok":[true,null]}`, []bool{true, true, false}},
		{`{"id":"abcd"}`, []bool{true, false, true}},
		{`{"id":"ABCD"}`, []bool{true, false, true}},
		{`{"b64":"AAE="}`, []bool{true, false, false}},
		{`{"n":[1,3.0,3e0]}`, []bool{true, false, true}},
		{`{"side":1.0}`, []bool{true, false, false}},
	}
	canon, rec := canonAndArrow(t, s, rows)
	for _, tc := range cases {
		f, err := s.CompileFilter([]byte(tc.where))
		if err != nil {
			t.Fatalf("%s: %v", tc.where, err)
		}
		var r Row
		for i, c := range canon {
			if err := s.Decode(&r, c); err != nil {
				t.Fatal(err)
			}
			got := []bool{f.MatchRow(&r), f.MatchCanonical(c), f.MatchArrow(rec.Columns(), i)}
			for k, g := range got {
				if g != tc.want[i] {
					t.Errorf("%s on row %d: method %d says %v, want %v", tc.where, i, k, g, tc.want[i])
				}
			}
		}
	}
}

func TestMayMatchPrunesOnlyWhatCannotMatch(t *testing.T) {
	s := mustCompile(t, filterSchema)
	stats := map[string][2]string{
		"sym": {`"AAA"`, `"BTC"`},
		"n":   {`10`, `20`},
		"px":  {`-0.0`, `100.5`},
		"id":  {`"0000"`, `"00ff"`},
		"ok":  {`false`, `false`},
	}
	minmax := func(col string) ([]byte, []byte, bool) {
		v, ok := stats[col]
		return []byte(v[0]), []byte(v[1]), ok
	}
	cases := []struct {
		where string
		may   bool
	}{
		{`{"sym":"BTC"}`, true},
		{`{"sym":"ETH"}`, false},
		{`{"sym":["ETH","AB"]}`, true},
		{`{"n":9}`, false},
		{`{"n":[21,25]}`, false},
		{`{"n":[9,15]}`, true},
		{`{"n":20,"sym":"ZZZ"}`, false},
		{`{"px":0}`, true},
		{`{"px":100.6}`, false},
		{`{"id":"0100"}`, false},
		{`{"id":"00AB"}`, true},
		{`{"ok":true}`, false},
		{`{"tag":"x"}`, true},     // no statistics
		{`{"q":[null, 5]}`, true}, // null may match
		{`{"sym":"ETH","tag":"x"}`, false},
	}
	for _, tc := range cases {
		f, err := s.CompileFilter([]byte(tc.where))
		if err != nil {
			t.Fatal(err)
		}
		if got := f.MayMatch(minmax); got != tc.may {
			t.Errorf("MayMatch(%s) = %v, want %v", tc.where, got, tc.may)
		}
	}
	bad := func(string) ([]byte, []byte, bool) { return []byte("garbage"), []byte("{"), true }
	f, _ := s.CompileFilter([]byte(`{"n":1}`))
	if !f.MayMatch(bad) {
		t.Error("unreadable statistics pruned a file")
	}
}

func TestFiltersWithoutASchema(t *testing.T) {
	s := Any()
	cases := []struct {
		where string
		row   string
		want  bool
	}{
		{`{"ticker":"BTC"}`, `{"ticker":"BTC","px":1}`, true},
		{`{"ticker":"BTC"}`, `{"ticker":"B\u0054C"}`, true},
		{`{"ticker":"BTC"}`, `{"px":1}`, false},
		{`{"ticker":null}`, `{"px":1}`, true},
		{`{"ticker":null}`, `{"ticker":null}`, true},
		{`{"px":1}`, `{"px":1.0}`, true},
		{`{"px":1.0}`, `{"px":1e0}`, true},
		{`{"px":1.5}`, `{"px":15e-1}`, true},
		{`{"px":1}`, `{"px":true}`, false},
		{`{"px":true}`, `{"px":1}`, false},
		{`{"px":"1"}`, `{"px":1}`, false},
		{`{"px":[2,3]}`, `{"px":3}`, true},
		{`{"px":1}`, `{"px":[1]}`, false},
		{`{"a":1}`, `{"a":2,"a":1}`, true},
		{`{"a":1}`, `not json`, false},
		{`{"tikcer":"x"}`, `{"ticker":"x"}`, false},
	}
	for _, tc := range cases {
		f, err := s.CompileFilter([]byte(tc.where))
		if err != nil {
			t.Fatalf("%s: %v", tc.where, err)
		}
		var r Row
		_ = s.Decode(&r, []byte(tc.row))
		if got := f.MatchCanonical([]byte(tc.row)); got != tc.want {
			t.Errorf("%s on %s: %v, want %v", tc.where, tc.row, got, tc.want)
		}
		if len(r.Canonical) > 0 && f.MatchRow(&r) != tc.want {
			t.Errorf("%s on %s: MatchRow disagrees", tc.where, tc.row)
		}
		if !f.MayMatch(func(string) ([]byte, []byte, bool) { return []byte("0"), []byte("0"), true }) {
			t.Errorf("%s: MayMatch pruned without a schema", tc.where)
		}
	}
	f, err := s.CompileFilter([]byte(`{"b":[1e2, 1.5, "x", true, null]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(f.JSON()); got != `{"b":[100,1.5,"x",true,null]}` {
		t.Errorf("JSON() = %s", got)
	}
	if _, err := s.CompileFilter([]byte(`{"b":{}}`)); err == nil {
		t.Error("an object value accepted without a schema")
	}
}

// TestAnyFilterNumbersRoundingToIntegersEchoAsIntegers: without a schema, a
// number that is not an integer as written but whose float64 value is one
// (1e-400 underflows to 0; 9007199254740993.5 rounds to 9007199254740994)
// filters as that integer, so its echo compiles to itself and filters the
// same rows. FuzzCompileFilter found the echo {"a":0.0} for 1e-400, which
// compiled to {"a":0} (seed testdata/fuzz/FuzzCompileFilter/underflow-echo).
func TestAnyFilterNumbersRoundingToIntegersEchoAsIntegers(t *testing.T) {
	s := Any()
	for _, tc := range []struct{ where, echo string }{
		{`{"a":40E-20000000}`, `{"a":0}`},
		{`{"a":-1e-400}`, `{"a":0}`},
		{`{"a":9007199254740993.5}`, `{"a":9007199254740994}`},
		{`{"a":[1e-400,0,0.0]}`, `{"a":0}`},
		{`{"a":1e300}`, `{"a":1e+300}`}, // integral, but no int64: stays a float
	} {
		f, err := s.CompileFilter([]byte(tc.where))
		if err != nil {
			t.Fatalf("%s: %v", tc.where, err)
		}
		if got := string(f.JSON()); got != tc.echo {
			t.Errorf("%s echoes %s, want %s", tc.where, got, tc.echo)
		}
		again, err := s.CompileFilter(f.JSON())
		if err != nil || string(again.JSON()) != string(f.JSON()) {
			t.Errorf("%s: echo %s compiles to %s (%v)", tc.where, f.JSON(), again.JSON(), err)
		}
		for _, row := range []string{`{"a":0}`, `{"a":0.0}`, `{"a":1e-400}`, `{"a":9007199254740994}`, `{"a":1e300}`, `{"a":0.5}`} {
			if a, b := f.MatchCanonical([]byte(row)), again.MatchCanonical([]byte(row)); a != b {
				t.Errorf("on %s: %s matches %v, its echo %v", row, tc.where, a, b)
			}
		}
	}
	// A row value that rounds to a listed integer matches it, as it matches
	// the same filter written as a float (0 and 0.0 filter alike).
	for _, where := range []string{`{"a":0}`, `{"a":0.0}`, `{"a":1e-400}`} {
		f, err := s.CompileFilter([]byte(where))
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range []string{`{"a":0}`, `{"a":-0.0}`, `{"a":1e-400}`} {
			if !f.MatchCanonical([]byte(row)) {
				t.Errorf("%s does not match %s", where, row)
			}
		}
	}
}

// TestStringsThatNeedEscapesMatchAlikeFromRowsAndArrow: a string value is
// found by its text, not its JSON, so a newline and a backslash before an
// n, a quote and the end of a value, are told apart by rows and by Arrow
// arrays alike, whether or not the filter's list holds an escaped string.
func TestStringsThatNeedEscapesMatchAlikeFromRowsAndArrow(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"sym":{"type":"string"}},"required":["sym"]}`)
	syms := []string{
		`"line\nbreak"`, `"line\\nbreak"`, `"say \"hi\""`, `"tab\there"`,
		`"plain"`, `"caf\u00e9"`, `"a\\"`, `"\u0001x"`, `"a"`,
	}
	cases := []struct {
		where string
		want  []int // the rows that match
	}{
		{`{"sym":["plain","other"]}`, []int{4}},
		{`{"sym":["a","b"]}`, []int{8}},
		{`{"sym":["say ","line","a\\"]}`, []int{6}},
		{`{"sym":["line\\nbreak","plain"]}`, []int{1, 4}},
		{`{"sym":["line\nbreak","x"]}`, []int{0}},
		{`{"sym":["say \"hi\"","a\\"]}`, []int{2, 6}},
		{`{"sym":["café","tab\there","\u0001x"]}`, []int{3, 5, 7}},
		{`{"sym":["caf\u00e9","say"]}`, []int{5}},
		{`{"sym":"line\\nbreak"}`, []int{1}},
		{`{"sym":"a"}`, []int{8}},
		{`{"sym":"line"}`, nil},
	}
	rows := make([]string, len(syms))
	for i, sym := range syms {
		rows[i] = `{"sym":` + sym + `}`
	}
	canon, rec := canonAndArrow(t, s, rows)
	for _, tc := range cases {
		f, err := s.CompileFilter([]byte(tc.where))
		if err != nil {
			t.Fatalf("%s: %v", tc.where, err)
		}
		anyf, err := Any().CompileFilter([]byte(tc.where))
		if err != nil {
			t.Fatalf("%s without a schema: %v", tc.where, err)
		}
		var r Row
		for i, c := range canon {
			if err := s.Decode(&r, c); err != nil {
				t.Fatal(err)
			}
			want := slices.Contains(tc.want, i)
			got := []bool{f.MatchRow(&r), f.MatchCanonical(c), f.MatchArrow(rec.Columns(), i), anyf.MatchCanonical(c)}
			for k, g := range got {
				if g != want {
					t.Errorf("%s on %s: method %d says %v, want %v", tc.where, c, k, g, want)
				}
			}
		}
	}
}

// canonAndArrow decodes rows against s and returns their canonical forms
// and the same rows as one Arrow record, released when the test ends: the
// three forms a filter matches.
func canonAndArrow(t *testing.T, s *Schema, rows []string) ([][]byte, arrow.RecordBatch) {
	t.Helper()
	rb := array.NewRecordBuilder(memory.NewGoAllocator(), s.Arrow())
	defer rb.Release()
	var canon [][]byte
	for _, in := range rows {
		c := decodeOK(t, s, in)
		canon = append(canon, []byte(c))
		if err := s.AppendArrow(rb.Fields(), []byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	rec := rb.NewRecordBatch()
	t.Cleanup(rec.Release)
	return canon, rec
}

// TestALongListMatchesEachOfItsValuesAndNoOther lists every other row's
// trade_id (a string) or event_ts (an integer), up to lists whose values
// span more than 64 KiB of the echo (the table's wide form): each listed
// row matches, as a decoded row, a canonical row, an Arrow row and a row
// without a schema, and each row in between does not.
func TestALongListMatchesEachOfItsValuesAndNoOther(t *testing.T) {
	s := mustCompile(t, tradeSchema)
	for _, n := range []int{2, 9, 5000, 20000} {
		rec, canon := tradeBatch(t, s, 2*n)
		// Row i's values, as tradeRow writes them.
		values := map[string]func(i int) string{
			"trade_id": func(i int) string { return `"` + strconv.Itoa(700000000+i) + `"` },
			"event_ts": func(i int) string { return strconv.Itoa(1735689600000000 + i*1375) },
		}
		for column, value := range values {
			where := []byte(`{"` + column + `":[`)
			for i := 0; i < 2*n; i += 2 {
				if i > 0 {
					where = append(where, ',')
				}
				where = append(where, value(i)...)
			}
			where = append(where, "]}"...)
			for _, sch := range []*Schema{s, Any()} {
				f, err := sch.CompileFilter(where)
				if err != nil {
					t.Fatal(err)
				}
				if wide := len(where) > 64<<10; f.terms[0].wide != wide {
					t.Fatalf("%d values, %d bytes: wide table %v, want %v", n, len(where), f.terms[0].wide, wide)
				}
				var r Row
				for i, c := range canon {
					want := i%2 == 0
					if got := f.MatchCanonical(c); got != want {
						t.Fatalf("%s in %d values (schema %v): row %d matched %v, want %v", column, n, !sch.IsAny(), i, got, want)
					}
					if sch.IsAny() {
						continue
					}
					if err := s.Decode(&r, c); err != nil {
						t.Fatal(err)
					}
					if f.MatchRow(&r) != want || f.MatchArrow(rec.Columns(), i) != want {
						t.Fatalf("%s in %d values: row %d does not match alike as a row, canonical and Arrow", column, n, i)
					}
				}
			}
		}
		rec.Release()
	}
}

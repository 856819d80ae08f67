package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/streamcast/streamcast/pkg/schema/jsontext"
)

// decodeOK decodes data and fails the test on a refusal.
func decodeOK(t *testing.T, s *Schema, data string) string {
	t.Helper()
	var r Row
	if err := s.Decode(&r, []byte(data)); err != nil {
		t.Fatalf("Decode(%s): %v", data, err)
	}
	return string(r.Canonical)
}

func TestDecodeWritesTheCanonicalForm(t *testing.T) {
	cases := []struct {
		name, prop, in, want string
	}{
		{"integer", `{"type":"integer"}`, `123`, `123`},
		{"negative integer", `{"type":"integer"}`, `-9223372036854775808`, `-9223372036854775808`},
		{"max int64", `{"type":"integer"}`, `9223372036854775807`, `9223372036854775807`},
		{"minus zero integer", `{"type":"integer"}`, `-0`, `0`},
		{"integral fraction", `{"type":"integer"}`, `12.0`, `12`},
		{"integral exponent", `{"type":"integer"}`, `1e3`, `1000`},
		{"integral mixed", `{"type":"integer"}`, `12.5E1`, `125`},
		{"zero with exponent", `{"type":"integer"}`, `0e99999999999`, `0`},
		{"int32 max", `{"type":"integer","format":"int32"}`, `2147483647`, `2147483647`},
		{"int32 min", `{"type":"integer","format":"int32"}`, `-2147483648`, `-2147483648`},
		{"integral float keeps .0", `{"type":"number"}`, `85565`, `85565.0`},
		{"float as given", `{"type":"number"}`, `85565.12`, `85565.12`},
		{"float trailing zeros dropped", `{"type":"number"}`, `1.500`, `1.5`},
		{"float shortest", `{"type":"number"}`, `0.1000000000000000055511151231257827`, `0.1`},
		{"float 17 digits", `{"type":"number"}`, `0.30000000000000004`, `0.30000000000000004`},
		{"float exponent to plain", `{"type":"number"}`, `8.5565e4`, `85565.0`},
		{"float small stays plain", `{"type":"number"}`, `0.000001`, `0.000001`},
		{"float smaller is exponent", `{"type":"number"}`, `0.0000001`, `1e-7`},
		{"float large is exponent", `{"type":"number"}`, `1e21`, `1e+21`},
		{"float below 1e21 is plain", `{"type":"number"}`, `123456789012345678901`, `123456789012345680000.0`},
		{"float 1.5e300", `{"type":"number"}`, `1.5E+300`, `1.5e+300`},
		{"float underflows to zero", `{"type":"number"}`, `1e-400`, `0.0`},
		{"minus zero float", `{"type":"number"}`, `-0`, `-0.0`},
		{"minus zero float fraction", `{"type":"number"}`, `-0.0`, `-0.0`},
		{"float32 shortest", `{"type":"number","format":"float"}`, `0.1`, `0.1`},
		{"float32 rounds", `{"type":"number","format":"float"}`, `3.14159265358979`, `3.1415927`},
		{"float32 integral", `{"type":"number","format":"float"}`, `16777217`, `16777216.0`},
		{"boolean", `{"type":"boolean"}`, `false`, `false`},
		{"string", `{"type":"string"}`, `"BTC-USD"`, `"BTC-USD"`},
		{"string unescapes what needs no escape", `{"type":"string"}`, `"\u00e9\/\u0041"`, `"é/A"`},
		{"string keeps required escapes", `{"type":"string"}`, `"a\"b\\c\nd\re\tf\bg\fh\u0001i\u001f"`, `"a\"b\\c\nd\re\tf\bg\fh\u0001i\u001f"`},
		{"string no HTML escaping", `{"type":"string"}`, `"<a href=\u0022x\u0022>&amp;</a>"`, `"<a href=\"x\">&amp;</a>"`},
		{"string surrogate pair", `{"type":"string"}`, `"\ud83d\ude00"`, `"😀"`},
		{"string raw UTF-8 kept", `{"type":"string"}`, `"日本語 😀"`, `"日本語 😀"`},
		{"string line separator kept", `{"type":"string"}`, `"\u2028"`, "\"\u2028\""},
		{"string DEL kept", `{"type":"string"}`, `"\u007f"`, "\"\x7f\""},
		{"base16 lowercased", `{"type":"string","contentEncoding":"base16"}`, `"DEADbeef"`, `"deadbeef"`},
		{"base16 empty", `{"type":"string","contentEncoding":"base16"}`, `""`, `""`},
		{"base64", `{"type":"string","contentEncoding":"base64"}`, `"aGVsbG8="`, `"aGVsbG8="`},
		{"base64 escaped", `{"type":"string","contentEncoding":"base64"}`, `"aGVsbG8\u003d"`, `"aGVsbG8="`},
		{"bytesN", `{"type":"string","contentEncoding":"base16","format":"bytes4"}`, `"0A0B0C0D"`, `"0a0b0c0d"`},
		{"bytesN base64", `{"type":"string","contentEncoding":"base64","format":"bytes2"}`, `"AAE="`, `"AAE="`},
		{"struct in order", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":["string","null"]}},"required":["a"]}`, `{"a":1,"b":"x"}`, `{"a":1,"b":"x"}`},
		{"struct out of order", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":["string","null"]}},"required":["a"]}`, `{ "b" : "x" , "a" : 1 }`, `{"a":1,"b":"x"}`},
		{"struct omitted nullable", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":["string","null"]}},"required":["a"]}`, `{"a":1}`, `{"a":1,"b":null}`},
		{"struct escaped key", `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`, `{"\u0061":1}`, `{"a":1}`},
		{"list", `{"type":"array","items":{"type":"number"}}`, `[1, 2.5 ,-0]`, `[1.0,2.5,-0.0]`},
		{"empty list", `{"type":"array","items":{"type":"number"}}`, `[ ]`, `[]`},
		{"list of nullable", `{"type":"array","items":{"type":["integer","null"]}}`, `[1,null]`, `[1,null]`},
		{"nested list", `{"type":"array","items":{"type":"array","items":{"type":"string","contentEncoding":"base16"}}}`, `[["AB"],[]]`, `[["ab"],[]]`},
		{"map keeps key order", `{"type":"object","additionalProperties":{"type":"integer"}}`, `{"z":1,"a":2,"\u00e9":3}`, `{"z":1,"a":2,"é":3}`},
		{"empty map", `{"type":"object","additionalProperties":{"type":"integer"}}`, `{}`, `{}`},
		{"map of structs", `{"type":"object","additionalProperties":{"type":"object","properties":{"n":{"type":["number","null"]}}}}`, `{"k":{}}`, `{"k":{"n":null}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, one(tc.prop))
			got := decodeOK(t, s, `{"c":`+tc.in+`}`)
			if want := `{"c":` + tc.want + `}`; got != want {
				t.Fatalf("canonical = %s, want %s", got, want)
			}
			if again := decodeOK(t, s, got); again != got {
				t.Fatalf("decoding the canonical form changed it: %s → %s", got, again)
			}
			if !json.Valid([]byte(got)) {
				t.Fatalf("canonical form is not valid JSON: %s", got)
			}
		})
	}
}

func TestDecodeOrdersColumnsAndFillsNulls(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":["string","null"]},"c":{"type":["number","null"]},"d":{"type":"boolean"}},"required":["a","d"]}`)
	for _, in := range []string{
		`{"a":1,"d":true}`,
		`{"d":true,"a":1}`,
		"\n{ \"a\" : 1 ,\t\"c\":null, \"d\" : true }\r\n",
		`{"b":null,"a":1,"d":true}`,
	} {
		if got := decodeOK(t, s, in); got != `{"a":1,"b":null,"c":null,"d":true}` {
			t.Errorf("Decode(%q) = %s", in, got)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	trade := mustCompile(t, tradeSchema)
	nested := mustCompile(t, `{"type":"object","properties":{
		"res":{"type":"object","properties":{"service":{"type":"string"},"pid":{"type":["integer","null"]}},"required":["service"]},
		"tags":{"type":["array","null"],"items":{"type":"string"}},
		"attrs":{"type":["object","null"],"additionalProperties":{"type":"integer","format":"int32"}},
		"deep":{"type":["array","null"],"items":{"type":"object","properties":{"x":{"type":"array","items":{"type":"number"}}},"required":["x"]}},
		"id":{"type":["string","null"],"contentEncoding":"base16","format":"bytes4"},
		"blob":{"type":["string","null"],"contentEncoding":"base64"},
		"f":{"type":["number","null"],"format":"float"},
		"n":{"type":["string","null"]}},
		"required":["res","n"]}`)
	const okRes = `"res":{"service":"s"},"n":null`
	cases := []struct {
		name string
		s    *Schema
		in   string
		path string
		want []string
	}{
		{"unknown column", trade, `{"tikcer":"x"}`, "tikcer", []string{"no such column", "declared: event_ts, symbol"}},
		{"a system column", trade, `{"streamcast_ts":1}`, "streamcast_ts", []string{"set by streamcast"}},
		{"missing required", trade, `{"event_ts":1,"symbol":"x","amount":1,"side":1,"trade_id":"t"}`, "price", []string{"missing", "required", "a number"}},
		{"missing required nullable", nested, `{"res":{"service":"s"}}`, "n", []string{"missing", "key must be present", "may be null"}},
		{"null in NOT NULL", trade, `{"event_ts":null}`, "event_ts", []string{"null", `"integer"`, `add "null"`}},
		{"wrong type", trade, `{"event_ts":1,"symbol":"x","price":"abc"}`, "price", []string{`expected a number, got a string "abc"`}},
		{"wrong type string", trade, `{"event_ts":1,"symbol":7}`, "symbol", []string{"expected a string, got a number 7"}},
		{"wrong type boolean", nested, `{` + okRes + `,"tags":true}`, "tags", []string{"expected an array, got a boolean true"}},
		{"fraction in an integer", trade, `{"event_ts":1.5}`, "event_ts", []string{"1.5 is not an integer"}},
		{"small fraction in an integer", trade, `{"event_ts":1e-3}`, "event_ts", []string{"not an integer"}},
		{"int64 overflow", trade, `{"event_ts":9223372036854775808}`, "event_ts", []string{"out of range for int64"}},
		{"int64 underflow", trade, `{"event_ts":-9223372036854775809}`, "event_ts", []string{"out of range for int64"}},
		{"int64 overflow by exponent", trade, `{"event_ts":1e19}`, "event_ts", []string{"out of range for int64"}},
		{"int32 overflow", trade, `{"event_ts":1,"symbol":"x","price":1,"amount":1,"side":2147483648}`, "side", []string{"out of range for int32"}},
		{"int32 by exponent", trade, `{"event_ts":1,"symbol":"x","price":1,"amount":1,"side":-3e9}`, "side", []string{"out of range for int32"}},
		{"non-finite", trade, `{"event_ts":1,"symbol":"x","price":1e400}`, "price", []string{"1e400 is not a finite number"}},
		{"float32 overflow", nested, `{` + okRes + `,"f":1e39}`, "f", []string{"out of range for float32"}},
		{"NaN is not JSON", trade, `{"event_ts":1,"symbol":"x","price":NaN}`, "price", []string{"expected a number"}},
		{"bad base16", nested, `{` + okRes + `,"id":"4bf9zz00"}`, "id", []string{"not valid base16", "'z' at position 4"}},
		{"odd base16", nested, `{` + okRes + `,"id":"abc"}`, "id", []string{"odd number of hex digits"}},
		{"wrong size for bytesN", nested, `{` + okRes + `,"id":"abcdef"}`, "id", []string{`holds 3 bytes`, `"bytes4" needs exactly 4`}},
		{"bad base64", nested, `{` + okRes + `,"blob":"a*=="}`, "blob", []string{"not valid base64"}},
		{"unpadded base64", nested, `{` + okRes + `,"blob":"aGVsbG8"}`, "blob", []string{"not valid base64"}},
		{"non-canonical base64", nested, `{` + okRes + `,"blob":"aGVsbG9="}`, "blob", []string{"not valid base64"}},
		{"base64 with a line break", nested, `{` + okRes + `,"blob":"aGVs\nbG8="}`, "blob", []string{"line break"}},
		{"map as pairs", nested, `{` + okRes + `,"attrs":[["a",1]]}`, "attrs", []string{"list of [key, value] pairs is not accepted"}},
		{"map value out of range", nested, `{` + okRes + `,"attrs":{"a":1,"b":5000000000}}`, `attrs["b"]`, []string{"out of range for int32"}},
		{"map duplicate key", nested, `{` + okRes + `,"attrs":{"a":1,"a":2}}`, `attrs["a"]`, []string{"given twice"}},
		{"unknown struct field", nested, `{"res":{"service":"s","sevrice":"t"},"n":null}`, "res.sevrice", []string{"no such property", "declared: service, pid"}},
		{"missing struct field", nested, `{"res":{"pid":1},"n":null}`, "res.service", []string{"missing"}},
		{"list element", nested, `{` + okRes + `,"tags":["a",2]}`, "tags[1]", []string{"expected a string, got a number 2"}},
		{"null list element", nested, `{` + okRes + `,"tags":[null]}`, "tags[0]", []string{"null"}},
		{"deep path", nested, `{` + okRes + `,"deep":[{"x":[]},{"x":[1,"2"]}]}`, "deep[1].x[1]", []string{"expected a number"}},
		{"duplicate column", trade, `{"event_ts":1,"event_ts":2}`, "event_ts", []string{"given twice"}},
		{"duplicate column out of order", nested, `{"n":null,"res":{"service":"s"},"n":"x"}`, "n", []string{"given twice"}},
		{"duplicate struct field", nested, `{"res":{"service":"s","service":"t"},"n":null}`, "res.service", []string{"given twice"}},
		{"trailing garbage", trade, `{"event_ts":1,"symbol":"x","price":1,"amount":1,"side":1,"trade_id":"t"} x`, "", []string{"unexpected text after"}},
		{"two objects", trade, `{"event_ts":1,"symbol":"x","price":1,"amount":1,"side":1,"trade_id":"t"}{}`, "", []string{"unexpected text after"}},
		{"not an object", trade, `[1,2]`, "", []string{"expected a JSON object, got an array"}},
		{"empty input", trade, ``, "", []string{"expected a JSON object, got nothing"}},
		{"truncated", trade, `{"event_ts":1,`, "", []string{"invalid JSON"}},
		{"trailing comma", trade, `{"event_ts":1,"symbol":"x","price":1,"amount":1,"side":1,"trade_id":"t",}`, "", []string{"invalid JSON", "expected a string key"}},
		{"leading zero", trade, `{"event_ts":01}`, "", []string{"invalid JSON"}},
		{"invalid UTF-8", trade, "{\"event_ts\":1,\"symbol\":\"\xff\"}", "symbol", []string{"invalid UTF-8"}},
		{"lone surrogate", trade, `{"event_ts":1,"symbol":"\ud800"}`, "symbol", []string{"lone UTF-16 surrogate"}},
		{"raw control character", trade, "{\"event_ts\":1,\"symbol\":\"a\nb\"}", "symbol", []string{"raw control character"}},
		{"bad escape", trade, `{"event_ts":1,"symbol":"\x41"}`, "symbol", []string{`invalid escape \x`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r Row
			err := tc.s.Decode(&r, []byte(tc.in))
			if err == nil {
				t.Fatalf("Decode accepted it: %s", r.Canonical)
			}
			var re *RowError
			if !errors.As(err, &re) {
				t.Fatalf("error %T %v is not a *RowError", err, err)
			}
			if re.Path != tc.path {
				t.Errorf("Path = %q, want %q (%v)", re.Path, tc.path, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if len(r.Canonical) != 0 {
				t.Errorf("a refused row left Canonical = %s", r.Canonical)
			}
			if _, err2 := tc.s.AppendCanonical(nil, []byte(tc.in)); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("AppendCanonical's error %v differs from Decode's %v", err2, err)
			}
		})
	}
}

func TestRowErrorReadsAsASentence(t *testing.T) {
	var r Row
	err := mustCompile(t, tradeSchema).Decode(&r, []byte(`{"event_ts":1,"symbol":"x","price":"abc"}`))
	if want := `column "price": expected a number, got a string "abc"`; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func TestAppendCanonicalAppendsWhatDecodeWrites(t *testing.T) {
	s := mustCompile(t, tradeSchema)
	var r Row
	dst := []byte("prefix:")
	for i := 0; i < 100; i++ {
		row := tradeRow(i)
		if err := s.Decode(&r, row); err != nil {
			t.Fatal(err)
		}
		before := len(dst)
		var err error
		if dst, err = s.AppendCanonical(dst, row); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst[before:], r.Canonical) {
			t.Fatalf("AppendCanonical wrote %s, Decode %s", dst[before:], r.Canonical)
		}
	}
	if !bytes.HasPrefix(dst, []byte("prefix:")) {
		t.Fatal("AppendCanonical overwrote dst")
	}
	out, err := s.AppendCanonical(dst, []byte(`{"bad":1}`))
	if err == nil || len(out) != len(dst) {
		t.Fatalf("a refused row changed dst (len %d → %d), err %v", len(dst), len(out), err)
	}
}

func TestRowValueReturnsEachColumn(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":["string","null"]},"c":{"type":"number"}},"required":["a","c"]}`)
	var r Row
	for _, in := range []string{`{"c":2,"a":1}`, `{"a":1,"c":2}`} {
		if err := s.Decode(&r, []byte(in)); err != nil {
			t.Fatal(err)
		}
		got := []string{string(r.Value(0)), string(r.Value(1)), string(r.Value(2))}
		if strings.Join(got, " ") != "1 null 2.0" {
			t.Errorf("%s: values %q", in, got)
		}
		if r.Value(3) != nil || r.Value(-1) != nil || r.Schema() != s {
			t.Error("Value out of range or Schema wrong")
		}
	}
}

func TestAnyRelaysObjectsUnchanged(t *testing.T) {
	s := Any()
	for _, in := range []string{
		`{}`,
		` {"b":1, "a":[1,2,{"x":null}], "a":"dup", "f":1e400, "s":"\u00e9"} `,
		`{"nested":{"deep":[[[[]]]]}}`,
	} {
		var r Row
		if err := s.Decode(&r, []byte(in)); err != nil {
			t.Fatalf("Decode(%s): %v", in, err)
		}
		if string(r.Canonical) != in {
			t.Errorf("Decode(%s) = %s, want it unchanged", in, r.Canonical)
		}
		if r.Value(0) != nil {
			t.Error("Any rows have no columns")
		}
	}
	for _, in := range []string{`[]`, `"x"`, `{"a":}`, `{"a":1} {}`, "{\"a\":\"\xff\"}", ``, `{"a":1,}`, strings.Repeat("[", 100000)} {
		var r Row
		if err := s.Decode(&r, []byte(in)); err == nil {
			t.Errorf("Decode(%.40q) accepted it", in)
		}
	}
	deep := `{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`
	if _, err := s.AppendCanonical(nil, []byte(deep)); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("deep nesting: %v", err)
	}
}

// TestNullabilityTableMatchesAJSONSchemaValidator checks the four rows of
// the nullability table (required/optional × plain/nullable) against
// santhosh-tekuri/jsonschema for a value, null and an absent key: streamcast
// accepts a row exactly when a real validator does, and refuses at compile
// time the one combination it cannot store (optional with a plain type).
func TestNullabilityTableMatchesAJSONSchemaValidator(t *testing.T) {
	rows := []struct {
		name, typ string
		required  bool
		compiles  bool
	}{
		{"required plain", `"string"`, true, true},
		{"required nullable", `["string","null"]`, true, true},
		{"optional plain", `"string"`, false, false},
		{"optional nullable", `["string","null"]`, false, true},
	}
	values := []struct{ name, row, canonical string }{
		{"value", `{"c":"x"}`, `{"c":"x"}`},
		{"null", `{"c":null}`, `{"c":null}`},
		{"absent", `{}`, `{"c":null}`},
	}
	for _, tr := range rows {
		doc := `{"type":"object","properties":{"c":{"type":` + tr.typ + `}}`
		if tr.required {
			doc += `,"required":["c"]`
		}
		doc += `}`
		validator := compileValidator(t, doc)
		s, err := Compile([]byte(doc))
		if (err == nil) != tr.compiles {
			t.Fatalf("%s: Compile err = %v, want compiles=%v", tr.name, err, tr.compiles)
		}
		for _, v := range values {
			t.Run(tr.name+"/"+v.name, func(t *testing.T) {
				inst, err := jsonschema.UnmarshalJSON(strings.NewReader(v.row))
				if err != nil {
					t.Fatal(err)
				}
				valid := validator.Validate(inst) == nil
				if s == nil {
					// Optional with a plain type: the validator accepts a value
					// and an absence but refuses null, which no column can say.
					want := v.name != "null"
					if valid != want {
						t.Fatalf("validator valid=%v, the table says %v", valid, want)
					}
					return
				}
				var r Row
				err = s.Decode(&r, []byte(v.row))
				if (err == nil) != valid {
					t.Fatalf("streamcast err=%v but validator valid=%v", err, valid)
				}
				if err == nil && string(r.Canonical) != v.canonical {
					t.Fatalf("canonical %s, want %s", r.Canonical, v.canonical)
				}
			})
		}
	}
}

func compileValidator(t *testing.T, doc string) *jsonschema.Schema {
	t.Helper()
	d, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", d); err != nil {
		t.Fatal(err)
	}
	v, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestAcceptedRowsAreValidForTheValidator cross-checks richer rows: what
// streamcast accepts, a JSON Schema validator accepts against JSON().
func TestAcceptedRowsAreValidForTheValidator(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{
		"i":{"type":"integer","format":"int32"},"n":{"type":["number","null"]},"s":{"type":"string"},
		"st":{"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"]},
		"l":{"type":["array","null"],"items":{"type":"integer"}},"m":{"type":"object","additionalProperties":{"type":["string","null"]}}},
		"required":["i","s","st","m"]}`)
	v := compileValidator(t, string(s.JSON()))
	for _, in := range []string{
		`{"i":1,"s":"x","st":{"a":true},"m":{}}`,
		`{"i":1.0,"n":2,"s":"","st":{"a":false},"l":[1,2e2],"m":{"k":null,"j":"v"}}`,
	} {
		for _, row := range []string{in, decodeOK(t, s, in)} {
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(row))
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Validate(inst); err != nil {
				t.Errorf("validator refuses %s: %v", row, err)
			}
		}
	}
}

// TestDeepJSONSaysTheLimit: JSON nested past maxDepth is refused saying so,
// with the limit, and not as "invalid JSON" (it may well be valid).
func TestDeepJSONSaysTheLimit(t *testing.T) {
	if !strings.Contains(jsontext.TooDeep, " "+strconv.Itoa(jsontext.MaxDepth)+" levels") {
		t.Fatalf("jsontext.TooDeep %q does not give jsontext.MaxDepth %d", jsontext.TooDeep, jsontext.MaxDepth)
	}
	deep := []byte(`{"a":` + strings.Repeat("[", jsontext.MaxDepth+1) + strings.Repeat("]", jsontext.MaxDepth+1) + `}`)
	var r Row
	err := Any().Decode(&r, deep)
	if err == nil || !strings.Contains(err.Error(), jsontext.TooDeep) || strings.Contains(err.Error(), "invalid JSON") {
		t.Errorf("Decode of a row nested %d deep: %v", jsontext.MaxDepth+1, err)
	}
	_, err = Any().CompileFilter(deep)
	if err == nil || !strings.Contains(err.Error(), jsontext.TooDeep) || strings.Contains(err.Error(), "invalid JSON") {
		t.Errorf("CompileFilter of a filter nested %d deep: %v", jsontext.MaxDepth+1, err)
	}
}

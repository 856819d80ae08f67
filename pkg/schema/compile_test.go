package schema

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// one wraps a property schema as the only, required column "c".
func one(prop string) string {
	return `{"type":"object","properties":{"c":` + prop + `},"required":["c"]}`
}

// oneOptional wraps a property schema as the only, optional column "c".
func oneOptional(prop string) string {
	return `{"type":"object","properties":{"c":` + prop + `}}`
}

func TestCompileMapsEveryTypeOfTheTable(t *testing.T) {
	cases := []struct {
		name, doc string
		arrow     string // the Arrow type
		nullable  bool
		enc       Encoding
		json      string // the column as JSON() publishes it
	}{
		{"boolean", one(`{"type":"boolean"}`), "bool", false, EncodingNone, `{"type":"boolean"}`},
		{"integer is int64", one(`{"type":"integer"}`), "int64", false, EncodingNone, `{"type":"integer","format":"int64"}`},
		{"integer int64", one(`{"type":"integer","format":"int64"}`), "int64", false, EncodingNone, `{"type":"integer","format":"int64"}`},
		{"integer int32", one(`{"type":"integer","format":"int32"}`), "int32", false, EncodingNone, `{"type":"integer","format":"int32"}`},
		{"number is float64", one(`{"type":"number"}`), "float64", false, EncodingNone, `{"type":"number","format":"double"}`},
		{"number double", one(`{"type":"number","format":"double"}`), "float64", false, EncodingNone, `{"type":"number","format":"double"}`},
		{"number float", one(`{"type":"number","format":"float"}`), "float32", false, EncodingNone, `{"type":"number","format":"float"}`},
		{"string", one(`{"type":"string"}`), "utf8", false, EncodingNone, `{"type":"string"}`},
		{"base16 binary", one(`{"type":"string","contentEncoding":"base16"}`), "binary", false, EncodingBase16, `{"type":"string","contentEncoding":"base16"}`},
		{"base64 binary", one(`{"type":"string","contentEncoding":"base64"}`), "binary", false, EncodingBase64, `{"type":"string","contentEncoding":"base64"}`},
		{"fixed-size binary", one(`{"type":"string","contentEncoding":"base16","format":"bytes16"}`), "fixed_size_binary[16]", false, EncodingBase16,
			`{"type":"string","contentEncoding":"base16","format":"bytes16"}`},
		{"struct", one(`{"type":"object","properties":{"service":{"type":"string"},"pid":{"type":["integer","null"]}},"required":["service"],"additionalProperties":false}`),
			"struct<service: utf8, pid: int64 nullable>", false, EncodingNone,
			`{"type":"object","properties":{"service":{"type":"string"},"pid":{"type":["integer","null"],"format":"int64"}},"required":["service"],"additionalProperties":false}`},
		{"map", one(`{"type":"object","additionalProperties":{"type":"string"}}`), "map<utf8, utf8, items_non_nullable>", false, EncodingNone,
			`{"type":"object","additionalProperties":{"type":"string"}}`},
		{"map of nullable", one(`{"type":"object","additionalProperties":{"type":["number","null"]}}`), "map<utf8, float64, items_nullable>", false, EncodingNone,
			`{"type":"object","additionalProperties":{"type":["number","null"],"format":"double"}}`},
		{"list", one(`{"type":"array","items":{"type":"integer","format":"int32"}}`), "list<item: int32>", false, EncodingNone,
			`{"type":"array","items":{"type":"integer","format":"int32"}}`},
		{"list of nullable", one(`{"type":"array","items":{"type":["string","null"]}}`), "list<item: utf8, nullable>", false, EncodingNone,
			`{"type":"array","items":{"type":["string","null"]}}`},
		{"nullable, optional", oneOptional(`{"type":["string","null"]}`), "utf8", true, EncodingNone, `{"type":["string","null"]}`},
		{"nullable, null first", oneOptional(`{"type":["null","integer"]}`), "int64", true, EncodingNone, `{"type":["integer","null"],"format":"int64"}`},
		{"nullable, required", one(`{"type":["number","null"]}`), "float64", true, EncodingNone, `{"type":["number","null"],"format":"double"}`},
		{"nullable list", oneOptional(`{"type":["array","null"],"items":{"type":"string"}}`), "list<item: utf8>", true, EncodingNone,
			`{"type":["array","null"],"items":{"type":"string"}}`},
		{"annotations are allowed and dropped", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"urn:x","title":"T","description":"D","$comment":"C",
			"type":"object","properties":{"c":{"type":"boolean","title":"t","description":"d"}},"required":["c"]}`, "bool", false, EncodingNone, `{"type":"boolean"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Compile([]byte(tc.doc))
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			cols := s.Columns()
			if len(cols) != 1 || cols[0].Name != "c" {
				t.Fatalf("columns = %+v", cols)
			}
			c := cols[0]
			if c.Type.String() != tc.arrow {
				t.Errorf("arrow type = %s, want %s", c.Type, tc.arrow)
			}
			if c.Nullable != tc.nullable || c.Encoding != tc.enc {
				t.Errorf("nullable, encoding = %v, %v; want %v, %v", c.Nullable, c.Encoding, tc.nullable, tc.enc)
			}
			if f := s.Arrow().Field(0); !arrow.TypeEqual(f.Type, c.Type) || f.Nullable != c.Nullable {
				t.Errorf("Arrow() field %v disagrees with column %+v", f, c)
			}
			if got := string(s.JSON()); !strings.Contains(got, `"c":`+tc.json) {
				t.Errorf("JSON() = %s\nwant the column as %s", got, tc.json)
			}
			assertRoundTrips(t, s)
		})
	}
}

// assertRoundTrips checks Compile(JSON()) and FromArrow(Arrow()) give s back.
func assertRoundTrips(t *testing.T, s *Schema) {
	t.Helper()
	again, err := Compile(s.JSON())
	if err != nil {
		t.Fatalf("Compile(JSON()): %v\n%s", err, s.JSON())
	}
	if string(again.JSON()) != string(s.JSON()) {
		t.Errorf("Compile(JSON()) changed the schema:\n%s\n%s", s.JSON(), again.JSON())
	}
	back, err := FromArrow(s.Arrow())
	if err != nil {
		t.Fatalf("FromArrow(Arrow()): %v", err)
	}
	if string(back.JSON()) != string(s.JSON()) {
		t.Errorf("FromArrow(Arrow()) changed the schema:\n%s\n%s", s.JSON(), back.JSON())
	}
	if !back.Arrow().Equal(s.Arrow()) {
		t.Errorf("FromArrow(Arrow()).Arrow() = %v, want %v", back.Arrow(), s.Arrow())
	}
}

func TestCompileKeepsPropertyOrderAsColumnOrder(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"string"},"m":{"type":["number","null"]}},"required":["a","z"]}`)
	var names []string
	for _, c := range s.Columns() {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "z,a,m" {
		t.Fatalf("columns %s, want z,a,m", got)
	}
	for i, name := range names {
		if j, ok := s.ColumnIndex(name); !ok || j != i {
			t.Errorf("ColumnIndex(%q) = %d, %v", name, j, ok)
		}
	}
	if _, ok := s.ColumnIndex("nope"); ok {
		t.Error("ColumnIndex found an undeclared column")
	}
	want := `{"type":"object","properties":{"z":{"type":"integer","format":"int64"},"a":{"type":"string"},"m":{"type":["number","null"],"format":"double"}},"required":["z","a"],"additionalProperties":false}`
	if got := string(s.JSON()); got != want {
		t.Errorf("JSON() =\n%s\nwant\n%s", got, want)
	}
}

func TestCompileRecordsPresenceOfRequiredNullableColumns(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"a":{"type":["string","null"]},"b":{"type":["string","null"]},"c":{"type":"string"}},"required":["a","c"]}`)
	cols := s.Columns()
	if !cols[0].Required || cols[1].Required || !cols[2].Required {
		t.Fatalf("Required = %v %v %v, want true false true", cols[0].Required, cols[1].Required, cols[2].Required)
	}
	if v, _ := s.Arrow().Field(0).Metadata.GetValue(MetaRequired); v != "true" {
		t.Errorf("field a lacks %s metadata: %v", MetaRequired, s.Arrow().Field(0).Metadata)
	}
	assertRoundTrips(t, s)
}

func TestCompileRefuses(t *testing.T) {
	cases := []struct {
		name, doc string
		path      string // CompileError.Path
		want      []string
	}{
		{"optional with a plain type", oneOptional(`{"type":"string"}`), "c",
			[]string{`optional with type "string" cannot be stored`, `add it to "required"`, `["string","null"]`}},
		{"optional nested field with a plain type", one(`{"type":"object","properties":{"tag":{"type":"integer"}}}`), "c.tag",
			[]string{`optional with type "integer"`, `"required"`, `["integer","null"]`}},
		{"date-time", one(`{"type":"string","format":"date-time"}`), "c", []string{`format "date-time" cannot be stored`, "epoch integers"}},
		{"unknown string format", one(`{"type":"string","format":"email"}`), "c", []string{`format "email" is not supported`}},
		{"int8", one(`{"type":"integer","format":"int8"}`), "c", []string{`format "int8" cannot be stored`, "narrow and unsigned"}},
		{"int16", one(`{"type":"integer","format":"int16"}`), "c", []string{`format "int16"`, "narrow"}},
		{"uint32", one(`{"type":"integer","format":"uint32"}`), "c", []string{`format "uint32"`, "unsigned"}},
		{"uint64", one(`{"type":"integer","format":"uint64"}`), "c", []string{`format "uint64"`, "unsigned"}},
		{"unknown integer format", one(`{"type":"integer","format":"int128"}`), "c", []string{`format "int128" is not an integer width`}},
		{"unknown number format", one(`{"type":"number","format":"half"}`), "c", []string{`format "half" is not a number width`}},
		{"union", one(`{"type":["string","integer"]}`), "c", []string{`a union of "string" and "integer" cannot be stored`}},
		{"nullable union", one(`{"type":["string","integer","null"]}`), "c", []string{"union"}},
		{"null alone", one(`{"type":"null"}`), "c", []string{`type "null" alone cannot be stored`}},
		{"unknown type", one(`{"type":"text"}`), "c", []string{`type "text" is not a JSON Schema type`}},
		{"no type", one(`{"format":"int32"}`), "c", []string{`has no "type"`}},
		{"enum", one(`{"type":"string","enum":["a","b"]}`), "c", []string{`keyword "enum" is not supported`}},
		{"minimum", one(`{"type":"integer","minimum":0}`), "c", []string{`keyword "minimum" is not supported`}},
		{"pattern", one(`{"type":"string","pattern":"^a"}`), "c", []string{`keyword "pattern"`}},
		{"oneOf", one(`{"oneOf":[{"type":"string"}]}`), "c", []string{`keyword "oneOf"`, "union"}},
		{"$ref", one(`{"$ref":"#/$defs/x"}`), "c", []string{`keyword "$ref"`, "inline"}},
		{"OpenAPI nullable", one(`{"type":"string","nullable":true}`), "c", []string{`keyword "nullable"`, `["T","null"]`}},
		{"default", one(`{"type":"string","default":"x"}`), "c", []string{`keyword "default"`}},
		{"unknown keyword at the top", `{"type":"object","properties":{"c":{"type":"string"}},"required":["c"],"minProperties":1}`, "", []string{`keyword "minProperties"`}},
		{"additionalProperties true", one(`{"type":"object","additionalProperties":true}`), "c", []string{`"additionalProperties": true cannot be stored`}},
		{"additionalProperties true at the top", `{"type":"object","properties":{"c":{"type":"string"}},"required":["c"],"additionalProperties":true}`, "",
			[]string{`"additionalProperties": true`}},
		{"struct and map at once", one(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":{"type":"string"}}`), "c",
			[]string{`both "properties" and an "additionalProperties" schema`}},
		{"object without properties", one(`{"type":"object"}`), "c", []string{`an object needs "properties"`}},
		{"empty struct", one(`{"type":"object","properties":{}}`), "c", []string{`"properties" is empty`}},
		{"array without items", one(`{"type":"array"}`), "c", []string{`an array needs "items"`}},
		{"tuple items", one(`{"type":"array","items":[{"type":"string"}]}`), "c", []string{`"items" must be one schema`}},
		{"bad item", one(`{"type":"array","items":{"type":"integer","format":"uint8"}}`), "c[]", []string{`format "uint8"`}},
		{"bad map value", one(`{"type":"object","additionalProperties":{"type":"string","format":"date-time"}}`), "c{}", []string{`"date-time"`}},
		{"contentEncoding on an integer", one(`{"type":"integer","contentEncoding":"base64"}`), "c", []string{`keyword "contentEncoding" applies to type "string"`}},
		{"items on a string", one(`{"type":"string","items":{"type":"string"}}`), "c", []string{`keyword "items" applies to type "array"`}},
		{"unknown contentEncoding", one(`{"type":"string","contentEncoding":"base32"}`), "c", []string{`contentEncoding "base32" cannot be stored`}},
		{"bytesN without an encoding", one(`{"type":"string","format":"bytes16"}`), "c", []string{`format "bytes16" needs "contentEncoding"`}},
		{"bytes0", one(`{"type":"string","contentEncoding":"base16","format":"bytes0"}`), "c", []string{`format "bytes0"`}},
		{"bytes016", one(`{"type":"string","contentEncoding":"base16","format":"bytes016"}`), "c", []string{`format "bytes016"`}},
		{"reserved streamcast_ts", `{"type":"object","properties":{"streamcast_ts":{"type":"integer"}},"required":["streamcast_ts"]}`, "streamcast_ts",
			[]string{"reserved name"}},
		{"reserved streamcast_offset", `{"type":"object","properties":{"a":{"type":"integer"},"streamcast_offset":{"type":["integer","null"]}},"required":["a"]}`, "streamcast_offset",
			[]string{"reserved name"}},
		{"required names an unknown property", `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a","b"]}`, "",
			[]string{`"required" lists "b", which is not in "properties"`}},
		{"required twice", `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a","a"]}`, "", []string{`"required" lists "a" twice`}},
		{"top level not an object type", `{"type":"array","items":{"type":"string"}}`, "", []string{`the top level must be {"type": "object"`}},
		{"top level map", `{"type":"object","additionalProperties":{"type":"string"}}`, "", []string{`the top level must be`}},
		{"top level nullable", `{"type":["object","null"],"properties":{"a":{"type":"integer"}},"required":["a"]}`, "", []string{`the top level must be`}},
		{"no columns", `{"type":"object","properties":{}}`, "", []string{"at least one column"}},
		{"not JSON", `{"type":`, "", []string{"not valid JSON"}},
		{"duplicate property", `{"type":"object","properties":{"a":{"type":"integer"},"a":{"type":"string"}},"required":["a"]}`, "",
			[]string{`the key "a" appears twice`}},
		{"not an object", `[1]`, "", []string{"a schema is a JSON object, got an array"}},
		{"title not a string", one(`{"type":"string","title":3}`), "c", []string{`"title" must be a string`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Compile([]byte(tc.doc))
			if err == nil {
				t.Fatalf("Compile accepted it: %s", s.JSON())
			}
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v is not a *CompileError", err, err)
			}
			if ce.Path != tc.path {
				t.Errorf("Path = %q, want %q (%v)", ce.Path, tc.path, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestCompileErrorReadsAsASentence(t *testing.T) {
	_, err := Compile([]byte(oneOptional(`{"type":"string"}`)))
	want := `property "c": optional with type "string" cannot be stored: a stream cannot hold "absent, but never null"; add it to "required", or make its type ["string","null"]`
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

func TestFromArrowReadsEveryType(t *testing.T) {
	bin16 := arrow.NewMetadata([]string{MetaEncoding}, []string{"base16"})
	s, err := FromArrow(arrow.NewSchema([]arrow.Field{
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String},
		{Name: "raw", Type: arrow.BinaryTypes.Binary},
		{Name: "id", Type: &arrow.FixedSizeBinaryType{ByteWidth: 8}, Metadata: bin16},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64})},
		{Name: "l", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Float64)},
	}, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"b":{"type":"boolean"},"i32":{"type":["integer","null"],"format":"int32"},"i64":{"type":"integer","format":"int64"},` +
		`"f32":{"type":"number","format":"float"},"f64":{"type":["number","null"],"format":"double"},"s":{"type":"string"},` +
		`"raw":{"type":"string","contentEncoding":"base64"},"id":{"type":"string","contentEncoding":"base16","format":"bytes8"},` +
		`"st":{"type":"object","properties":{"x":{"type":"integer","format":"int64"}},"required":["x"],"additionalProperties":false},` +
		`"l":{"type":["array","null"],"items":{"type":["string","null"]}},"m":{"type":"object","additionalProperties":{"type":["number","null"],"format":"double"}}},` +
		`"required":["b","i64","f32","s","raw","id","st","m"],"additionalProperties":false}`
	if got := string(s.JSON()); got != want {
		t.Fatalf("JSON() =\n%s\nwant\n%s", got, want)
	}
	assertRoundTrips(t, s)
}

func TestFromArrowRefuses(t *testing.T) {
	cases := []struct {
		name   string
		fields []arrow.Field
		want   string
	}{
		{"a type JSON cannot carry", []arrow.Field{{Name: "t", Type: arrow.FixedWidthTypes.Timestamp_us}}, `property "t": has Arrow type timestamp`},
		{"a narrow integer", []arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int8}}, "int8"},
		{"an unsigned integer", []arrow.Field{{Name: "u", Type: arrow.PrimitiveTypes.Uint64}}, "uint64"},
		{"a map with integer keys", []arrow.Field{{Name: "m", Type: arrow.MapOf(arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String)}}, "JSON object keys are strings"},
		{"a system column", []arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: ColumnTS, Type: arrow.PrimitiveTypes.Int64}}, "system column"},
		{"no columns", nil, "no columns"},
		{"an unknown encoding", []arrow.Field{{Name: "b", Type: arrow.BinaryTypes.Binary, Metadata: arrow.NewMetadata([]string{MetaEncoding}, []string{"base32"})}}, "base32"},
		{"nested bad type", []arrow.Field{{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "d", Type: arrow.FixedWidthTypes.Date32})}}, `property "s.d"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromArrow(arrow.NewSchema(tc.fields, nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	if _, err := FromArrow(nil); err == nil {
		t.Error("FromArrow(nil) accepted")
	}
}

func TestAnyHasNoColumns(t *testing.T) {
	s := Any()
	if !s.IsAny() || len(s.Columns()) != 0 || s.Arrow().NumFields() != 0 {
		t.Fatalf("Any() = %v", s)
	}
	if mustCompile(t, tradeSchema).IsAny() {
		t.Error("a compiled schema reports IsAny")
	}
	if string(s.JSON()) != "null" {
		t.Errorf("Any().JSON() = %s, want null (no schema)", s.JSON())
	}
	if again, err := Compile(s.JSON()); err != nil || again != s {
		t.Errorf("Compile(Any().JSON()) = %v, %v", again, err)
	}
	if _, err := FromArrow(s.Arrow()); err == nil {
		t.Error("FromArrow(Any().Arrow()) gave a schema with no columns")
	}
}

func TestSchemaEqualComparesColumns(t *testing.T) {
	a := mustCompile(t, tradeSchema)
	b := mustCompile(t, string(a.JSON()))
	c := mustCompile(t, one(`{"type":"string"}`))
	if !a.Equal(b) || a.Equal(c) || a.Equal(Any()) || !Any().Equal(Any()) {
		t.Error("Equal disagrees with the columns")
	}
	if a.String() != string(a.JSON()) {
		t.Error("String is not JSON")
	}
}

package schema

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/streamcast/streamcast/pkg/schema/jsontext"
)

// Encoding says how a binary or fixed-size binary column is written in JSON.
type Encoding uint8

// The encodings of binary columns, from the column's "contentEncoding".
const (
	EncodingNone   Encoding = iota // not a binary column
	EncodingBase16                 // hex: lowercase out, either case in
	EncodingBase64                 // standard alphabet, padded, strict
)

// String returns the JSON Schema contentEncoding name ("" for EncodingNone).
func (e Encoding) String() string {
	switch e {
	case EncodingBase16:
		return "base16"
	case EncodingBase64:
		return "base64"
	}
	return ""
}

// Arrow field metadata keys that carry what an Arrow type alone does not, so
// FromArrow(s.Arrow()) gives back s.
const (
	// MetaEncoding holds "base16" or "base64" on binary and fixed-size
	// binary fields. A binary field without it reads back as base64.
	MetaEncoding = "streamcast.encoding"
	// MetaRequired is "true" on a nullable field that is also in its
	// object's "required": the key must be present, though it may be null.
	MetaRequired = "streamcast.required"
)

// Reserved top-level column names: the system columns storage adds. A schema
// that declares one, or a row that supplies one, is refused.
const (
	ColumnOffset = "streamcast_offset"
	ColumnTS     = "streamcast_ts"
)

// Column is one declared column (or a nested field, list item or map entry
// part of one).
type Column struct {
	Name     string
	Type     arrow.DataType // arrow type of the column
	Nullable bool
	Encoding Encoding // binary / fixed-size binary columns only
	Children []Column // struct: fields; list: one child; map: key, value

	// Required reports that the key must be present in a row (it is listed
	// in JSON Schema's "required"). A column that is not Nullable is always
	// Required; a Nullable one may be either (optional ones are written as
	// null when absent). List items and map parts are always Required.
	Required bool
}

// Schema is a compiled stream schema. Safe for concurrent use (immutable).
type Schema struct {
	any   bool
	root  *node // kind kStruct; its fields are the columns
	cols  []Column
	index map[string]int
	arrow *arrow.Schema
	json  []byte
}

type kind uint8

const (
	kBool kind = iota + 1
	kInt32
	kInt64
	kFloat32
	kFloat64
	kString
	kBinary
	kFixed
	kStruct
	kList
	kMap
)

// scalar reports whether a where= filter can compare the kind.
func (k kind) scalar() bool { return k < kStruct }

// node is the compiled form of one (sub)schema; the decoders and the Arrow
// conversions walk it.
type node struct {
	kind     kind
	name     string // property name; "" for list items and map values
	nullable bool
	required bool
	enc      Encoding
	size     int     // fixed-size binary width
	fields   []*node // struct fields, in declared order
	index    map[string]int
	elem     *node  // list item or map value
	key      []byte // canonical `"name":`, for struct fields
	dtype    arrow.DataType

	appendArrow appendFunc // canonical JSON → Arrow builder
	appendJSON  encodeFunc // Arrow array → canonical JSON (non-null values)
}

var anySchema = &Schema{any: true, root: &node{kind: kStruct}, index: map[string]int{},
	arrow: arrow.NewSchema(nil, nil), json: []byte(`null`)}

// Any returns the "no schema" Schema: it accepts any JSON object and relays
// its bytes unchanged. It has no columns, so it has no Arrow form (Arrow()
// has no fields, AppendArrow refuses), and its JSON() is null, which is what
// a greeting carries for a stream without a schema.
func Any() *Schema { return anySchema }

// IsAny reports whether s is the "no schema" Schema.
func (s *Schema) IsAny() bool { return s.any }

// Columns returns the declared columns in order (a copy of the slice; the
// Columns themselves must not be modified).
func (s *Schema) Columns() []Column { return append([]Column(nil), s.cols...) }

// Arrow returns the Arrow schema of the declared columns, without the system
// columns streamcast_offset and streamcast_ts. Binary fields carry their
// encoding, and nullable-but-required fields their presence rule, in field
// metadata (MetaEncoding, MetaRequired).
func (s *Schema) Arrow() *arrow.Schema { return s.arrow }

// JSON returns the schema as a JSON Schema document, the form greetings
// carry: widths explicit ("format": "int64", "double", …), nullable columns
// as ["T","null"], objects closed with "additionalProperties": false, and
// annotations (title, description, …) dropped. The bytes are stable for a
// given schema, and Compile(s.JSON()) gives back s. For Any it is null. The
// caller must not modify them.
func (s *Schema) JSON() []byte { return s.json }

// ColumnIndex returns the position of the named top-level column.
func (s *Schema) ColumnIndex(name string) (int, bool) {
	i, ok := s.index[name]
	return i, ok
}

// Equal reports whether s and t declare the same columns (same JSON).
func (s *Schema) Equal(t *Schema) bool {
	return s.any == t.any && string(s.json) == string(t.json)
}

// String returns the schema's JSON.
func (s *Schema) String() string { return string(s.json) }

// newSchema finishes a compiled root: columns, Arrow schema, JSON, and the
// per-column conversion functions.
func newSchema(root *node) *Schema {
	s := &Schema{root: root, index: make(map[string]int, len(root.fields))}
	fields := make([]arrow.Field, len(root.fields))
	for i, f := range root.fields {
		prepare(f)
		s.index[f.name] = i
		s.cols = append(s.cols, f.column())
		fields[i] = f.field()
	}
	prepareStruct(root)
	s.arrow = arrow.NewSchema(fields, nil)
	s.json = appendSchemaJSON(nil, root, true)
	return s
}

// prepare fills in the derived parts of n and its children: Arrow type,
// canonical keys, lookup index and conversion functions.
func prepare(n *node) {
	switch n.kind {
	case kStruct:
		for _, f := range n.fields {
			prepare(f)
		}
		prepareStruct(n)
	case kList, kMap:
		prepare(n.elem)
	}
	n.dtype = n.arrowType()
	n.appendArrow = newAppender(n)
	n.appendJSON = newEncoder(n)
}

func prepareStruct(n *node) {
	n.index = make(map[string]int, len(n.fields))
	for i, f := range n.fields {
		n.index[f.name] = i
		k := jsontext.AppendString(nil, []byte(f.name))
		f.key = append(k, ':')
	}
}

func (n *node) arrowType() arrow.DataType {
	switch n.kind {
	case kBool:
		return arrow.FixedWidthTypes.Boolean
	case kInt32:
		return arrow.PrimitiveTypes.Int32
	case kInt64:
		return arrow.PrimitiveTypes.Int64
	case kFloat32:
		return arrow.PrimitiveTypes.Float32
	case kFloat64:
		return arrow.PrimitiveTypes.Float64
	case kString:
		return arrow.BinaryTypes.String
	case kBinary:
		return arrow.BinaryTypes.Binary
	case kFixed:
		return &arrow.FixedSizeBinaryType{ByteWidth: n.size}
	case kStruct:
		fs := make([]arrow.Field, len(n.fields))
		for i, f := range n.fields {
			fs[i] = f.field()
		}
		return arrow.StructOf(fs...)
	case kList:
		item := n.elem.field()
		item.Name = "item"
		return arrow.ListOfField(item)
	case kMap:
		item := n.elem.field()
		return arrow.MapOfFields(arrow.Field{Name: "key", Type: arrow.BinaryTypes.String}, item)
	}
	panic("schema: unknown kind") // unreachable: kinds come from this package
}

func (n *node) field() arrow.Field {
	f := arrow.Field{Name: n.name, Type: n.dtype, Nullable: n.nullable}
	var keys, vals []string
	if n.enc != EncodingNone {
		keys, vals = append(keys, MetaEncoding), append(vals, n.enc.String())
	}
	if n.nullable && n.required {
		keys, vals = append(keys, MetaRequired), append(vals, "true")
	}
	if keys != nil {
		f.Metadata = arrow.NewMetadata(keys, vals)
	}
	return f
}

func (n *node) column() Column {
	c := Column{Name: n.name, Type: n.dtype, Nullable: n.nullable, Encoding: n.enc, Required: n.required}
	switch n.kind {
	case kStruct:
		for _, f := range n.fields {
			c.Children = append(c.Children, f.column())
		}
	case kList:
		e := n.elem.column()
		e.Name = "item"
		c.Children = []Column{e}
	case kMap:
		v := n.elem.column()
		v.Name = "value"
		c.Children = []Column{{Name: "key", Type: arrow.BinaryTypes.String, Required: true}, v}
	}
	return c
}

// typeWord is the JSON Schema type of a kind.
func (k kind) typeWord() string {
	switch k {
	case kBool:
		return "boolean"
	case kInt32, kInt64:
		return "integer"
	case kFloat32, kFloat64:
		return "number"
	case kString, kBinary, kFixed:
		return "string"
	case kStruct, kMap:
		return "object"
	case kList:
		return "array"
	}
	return "?"
}

// typeText is n's JSON Schema "type" as written in a schema: "string" or
// ["string","null"].
func (n *node) typeText() string {
	if n.nullable {
		return `["` + n.kind.typeWord() + `","null"]`
	}
	return `"` + n.kind.typeWord() + `"`
}

// wants describes what a value of n must be, for row errors.
func (n *node) wants() string {
	switch n.kind {
	case kBool:
		return "a boolean"
	case kInt32:
		return "an integer (int32)"
	case kInt64:
		return "an integer"
	case kFloat32, kFloat64:
		return "a number"
	case kString:
		return "a string"
	case kBinary, kFixed:
		return "a " + n.enc.String() + " string"
	case kStruct:
		return "an object"
	case kMap:
		return "an object (a map)"
	case kList:
		return "an array"
	}
	return "a value"
}

func appendSchemaJSON(dst []byte, n *node, top bool) []byte {
	dst = append(dst, `{"type":`...)
	dst = append(dst, n.typeText()...)
	switch n.kind {
	case kInt32:
		dst = append(dst, `,"format":"int32"`...)
	case kInt64:
		dst = append(dst, `,"format":"int64"`...)
	case kFloat32:
		dst = append(dst, `,"format":"float"`...)
	case kFloat64:
		dst = append(dst, `,"format":"double"`...)
	case kBinary:
		dst = append(dst, `,"contentEncoding":"`+n.enc.String()+`"`...)
	case kFixed:
		dst = append(dst, `,"contentEncoding":"`+n.enc.String()+`","format":"bytes`+strconv.Itoa(n.size)+`"`...)
	case kStruct:
		dst = append(dst, `,"properties":{`...)
		for i, f := range n.fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, f.key...)
			dst = appendSchemaJSON(dst, f, false)
		}
		dst = append(dst, '}')
		first := true
		for _, f := range n.fields {
			if !f.required {
				continue
			}
			if first {
				dst = append(dst, `,"required":[`...)
				first = false
			} else {
				dst = append(dst, ',')
			}
			dst = jsontext.AppendString(dst, []byte(f.name))
		}
		if !first {
			dst = append(dst, ']')
		}
		dst = append(dst, `,"additionalProperties":false`...)
	case kMap:
		dst = append(dst, `,"additionalProperties":`...)
		dst = appendSchemaJSON(dst, n.elem, false)
	case kList:
		dst = append(dst, `,"items":`...)
		dst = appendSchemaJSON(dst, n.elem, false)
	}
	return append(dst, '}')
}

// FromArrow is the inverse of Arrow: it reads the columns of an Arrow schema
// (bool, int32, int64, float32, float64, string, binary, fixed_size_binary,
// struct, list and map<string, …>, nested freely) back into a Schema.
// Binary fields take their encoding from MetaEncoding (base64 when absent).
// Any other type, and the reserved system column names, are refused.
func FromArrow(s *arrow.Schema) (*Schema, error) {
	if s == nil {
		return nil, &CompileError{Problem: "no Arrow schema given"}
	}
	root := &node{kind: kStruct}
	seen := map[string]bool{}
	for _, f := range s.Fields() {
		if f.Name == ColumnOffset || f.Name == ColumnTS {
			return nil, &CompileError{Path: f.Name, Problem: "is a system column streamcast adds itself; drop it from the Arrow schema"}
		}
		if seen[f.Name] {
			return nil, &CompileError{Path: f.Name, Problem: "appears twice in the Arrow schema"}
		}
		seen[f.Name] = true
		n, err := nodeFromField(f, f.Name, 0)
		if err != nil {
			return nil, err
		}
		root.fields = append(root.fields, n)
	}
	if len(root.fields) == 0 {
		return nil, &CompileError{Problem: "the Arrow schema has no columns; a stream without columns is declared with no schema at all"}
	}
	return newSchema(root), nil
}

func nodeFromField(f arrow.Field, path string, depth int) (*node, error) {
	if depth > maxSchemaDepth {
		return nil, &CompileError{Path: path, Problem: fmt.Sprintf("is nested deeper than %d levels", maxSchemaDepth)}
	}
	n := &node{name: f.Name, nullable: f.Nullable, required: !f.Nullable}
	if v, ok := f.Metadata.GetValue(MetaRequired); ok && v == "true" {
		n.required = true
	}
	binary := func() error {
		switch v, _ := f.Metadata.GetValue(MetaEncoding); v {
		case "base16":
			n.enc = EncodingBase16
		case "base64", "":
			n.enc = EncodingBase64
		default:
			return &CompileError{Path: path, Problem: fmt.Sprintf("metadata %s=%q is not base16 or base64", MetaEncoding, v)}
		}
		return nil
	}
	switch t := f.Type.(type) {
	case *arrow.BooleanType:
		n.kind = kBool
	case *arrow.Int32Type:
		n.kind = kInt32
	case *arrow.Int64Type:
		n.kind = kInt64
	case *arrow.Float32Type:
		n.kind = kFloat32
	case *arrow.Float64Type:
		n.kind = kFloat64
	case *arrow.StringType:
		n.kind = kString
	case *arrow.BinaryType:
		n.kind = kBinary
		if err := binary(); err != nil {
			return nil, err
		}
	case *arrow.FixedSizeBinaryType:
		n.kind, n.size = kFixed, t.ByteWidth
		if t.ByteWidth < 1 {
			return nil, &CompileError{Path: path, Problem: "is a fixed_size_binary of width 0"}
		}
		if err := binary(); err != nil {
			return nil, err
		}
	case *arrow.StructType:
		n.kind = kStruct
		seen := map[string]bool{}
		for _, cf := range t.Fields() {
			if seen[cf.Name] {
				return nil, &CompileError{Path: path + "." + cf.Name, Problem: "appears twice in its struct"}
			}
			seen[cf.Name] = true
			c, err := nodeFromField(cf, path+"."+cf.Name, depth+1)
			if err != nil {
				return nil, err
			}
			n.fields = append(n.fields, c)
		}
		if len(n.fields) == 0 {
			return nil, &CompileError{Path: path, Problem: "is a struct with no fields"}
		}
	case *arrow.ListType:
		n.kind = kList
		c, err := nodeFromField(t.ElemField(), path+"[]", depth+1)
		if err != nil {
			return nil, err
		}
		c.name, c.required = "", true
		n.elem = c
	case *arrow.MapType:
		n.kind = kMap
		if _, ok := t.KeyType().(*arrow.StringType); !ok {
			return nil, &CompileError{Path: path, Problem: fmt.Sprintf("is a map with %s keys; JSON object keys are strings", t.KeyType())}
		}
		c, err := nodeFromField(t.ItemField(), path+"{}", depth+1)
		if err != nil {
			return nil, err
		}
		c.name, c.required = "", true
		n.elem = c
	default:
		return nil, &CompileError{Path: path, Problem: fmt.Sprintf("has Arrow type %s, which a stream cannot hold (bool, int32, int64, float32, float64, string, binary, fixed_size_binary, struct, list, map<string,…>)", f.Type)}
	}
	return n, nil
}

// CompileError is a schema that cannot be stored. Path names the property:
// dotted for nested properties, with "[]" for an array's items and "{}" for
// a map's values ("res.service", "tags[]", "attrs{}"); it is empty for the
// document as a whole.
type CompileError struct {
	Path    string
	Problem string
}

// Error words the refusal: property "path": problem.
func (e *CompileError) Error() string {
	if e.Path == "" {
		return "schema: " + e.Problem
	}
	return "property " + strconv.Quote(e.Path) + ": " + e.Problem
}

// joinPath prefixes a row error path with a parent segment.
func joinPath(parent, child string) string {
	switch {
	case child == "":
		return parent
	case parent == "":
		return child
	case strings.HasPrefix(child, "["):
		return parent + child
	}
	return parent + "." + child
}

// AppendJSONString appends s as a canonical JSON string. Other packages
// use it so that every string the project writes, in rows, greetings and
// close reasons, is escaped one way.
func AppendJSONString(dst, s []byte) []byte { return jsontext.AppendString(dst, s) }

// b64 is strict standard base64 with padding: exactly one text per byte
// string, so the canonical form of valid input is the input itself.
var b64 = base64.StdEncoding.Strict()

// hexDigit are the digits of base16, lowercase.
const hexDigit = "0123456789abcdef"

// appendBinary writes b as a JSON string in the column's encoding: base16 as
// lowercase hex, base64 as standard padded.
func appendBinary(dst []byte, b []byte, enc Encoding) []byte {
	dst = append(dst, '"')
	if enc == EncodingBase16 {
		for _, c := range b {
			dst = append(dst, hexDigit[c>>4], hexDigit[c&0xF])
		}
	} else {
		dst = b64.AppendEncode(dst, b)
	}
	return append(dst, '"')
}

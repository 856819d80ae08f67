package schema

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/streamcast/streamcast/pkg/schema/jsontext"
)

// maxSchemaDepth bounds how deeply a schema may nest objects, arrays and maps.
const maxSchemaDepth = 64

// Compile compiles a JSON Schema document into a Schema.
//
// The top level is {"type": "object", "properties": {...}, "required": [...]};
// properties, in the order written, are the columns. The types are those of
// the mapping table: integer (int64; "format": "int32" for int32), number
// (float64, also "format": "double"; "format": "float" for float32),
// boolean, string, string with "contentEncoding" base16 or base64 (binary;
// "format": "bytesN" for fixed_size_binary(N)), object with "properties"
// (struct), object with "additionalProperties": {…} (map<string, …>) and
// array with "items" (list); ["T","null"] makes any of them nullable.
//
// Nullability: a property listed in "required" with a plain type is NOT NULL;
// "null" in its type makes it nullable (required: the key must be present;
// optional: an absent key is stored as null). An optional property with a
// non-null type is refused, since a stream cannot store "absent but never
// null". Refused too, naming the property: date-time and other formats
// without a column type, narrow and unsigned integer widths, unions, any
// keyword other than type, format, contentEncoding, properties, required,
// additionalProperties and items (the annotations title, description,
// $schema, $id and $comment are allowed and dropped), "additionalProperties":
// true, and the reserved column names streamcast_offset and streamcast_ts.
//
// The document null compiles to Any(), the inverse of Any().JSON().
func Compile(jsonSchema []byte) (*Schema, error) {
	v, err := parseJSON(jsonSchema)
	if err != nil {
		return nil, &CompileError{Problem: "the schema is not valid JSON: " + strings.TrimPrefix(err.Error(), "invalid JSON: ")}
	}
	if v.kind == 'z' {
		return Any(), nil // what Any().JSON() publishes: no schema
	}
	if v.kind != 'o' {
		return nil, &CompileError{Problem: "a schema is a JSON object, got " + v.kindName()}
	}
	root, err := compileNode(v, "", 0)
	if err != nil {
		return nil, err
	}
	if root.kind != kStruct || root.nullable {
		return nil, &CompileError{Problem: `the top level must be {"type": "object", "properties": {...}}: a row is an object whose properties are the columns`}
	}
	return newSchema(root), nil
}

var (
	annotations = map[string]bool{"title": true, "description": true, "$schema": true, "$id": true, "$comment": true}
	structural  = map[string]bool{"type": true, "format": true, "contentEncoding": true, "properties": true,
		"required": true, "additionalProperties": true, "items": true}
)

// keywordHint explains why a well-known JSON Schema keyword is refused.
func keywordHint(k string) string {
	switch k {
	case "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
		"minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems", "minProperties",
		"maxProperties", "minContains", "maxContains", "contains", "dependentRequired", "propertyNames":
		return "it is a validation constraint, and a stream's schema declares column types only; check it in the publisher"
	case "oneOf", "anyOf", "allOf", "not", "if", "then", "else":
		return "combinators make unions, which cannot be stored as one column"
	case "$ref", "$defs", "definitions", "$dynamicRef", "$anchor":
		return "references are not supported; write the subschema inline"
	case "default":
		return "a default is never applied: an absent nullable column is stored as null"
	case "nullable":
		return `"nullable" is OpenAPI, not JSON Schema; write the type as ["T","null"]`
	case "patternProperties", "unevaluatedProperties", "dependentSchemas":
		return `declare a struct with "properties", or a map with "additionalProperties": {…}`
	case "prefixItems", "unevaluatedItems":
		return `tuples cannot be stored; an array has one "items" schema`
	case "examples", "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentSchema":
		return "only title, description, $schema, $id and $comment are kept as annotations"
	}
	return "a stream's schema uses only type, format, contentEncoding, properties, required, additionalProperties and items (plus title, description, $schema, $id, $comment)"
}

func compileNode(v *jvalue, path string, depth int) (*node, error) {
	fail := func(format string, args ...any) (*node, error) {
		return nil, &CompileError{Path: path, Problem: fmt.Sprintf(format, args...)}
	}
	if depth > maxSchemaDepth {
		return fail("is nested deeper than %d levels", maxSchemaDepth)
	}
	if v.kind != 'o' {
		return fail("a schema is a JSON object, got %s", v.kindName())
	}
	for _, m := range v.members {
		if annotations[m.key] {
			if m.val.kind != 's' {
				return fail("%q must be a string, got %s", m.key, m.val.kindName())
			}
			continue
		}
		if !structural[m.key] {
			return fail("keyword %q is not supported: %s", m.key, keywordHint(m.key))
		}
	}
	tv := v.get("type")
	if tv == nil {
		return fail(`has no "type"; every property needs one (integer, number, boolean, string, object or array, or ["T","null"])`)
	}
	typ, nullable, prob := parseType(tv)
	if prob != "" {
		return fail("%s", prob)
	}
	n := &node{nullable: nullable}
	typeText := strconv.Quote(typ)
	// Keywords that only some types take.
	for _, o := range [...]struct{ key, typ string }{
		{"contentEncoding", "string"},
		{"properties", "object"},
		{"required", "object"},
		{"additionalProperties", "object"},
		{"items", "array"},
	} {
		if v.get(o.key) != nil && typ != o.typ {
			return fail("keyword %q applies to type %q, not to %s", o.key, o.typ, typeText)
		}
	}
	var format string
	if fv := v.get("format"); fv != nil {
		if fv.kind != 's' {
			return fail(`"format" must be a string, got %s`, fv.kindName())
		}
		format = fv.str
		if typ == "boolean" || typ == "object" || typ == "array" {
			return fail("format %q does not apply to type %s", format, typeText)
		}
	}
	switch typ {
	case "boolean":
		n.kind = kBool
	case "integer":
		switch format {
		case "", "int64":
			n.kind = kInt64
		case "int32":
			n.kind = kInt32
		case "int8", "int16", "uint8", "uint16", "uint32", "uint64", "uint":
			return fail(`format %q cannot be stored: narrow and unsigned integer widths are not kept (Iceberg widens or cannot hold them); use "int32" or "int64" (the default)`, format)
		case "date-time", "date", "time", "timestamp":
			return fail(`format %q cannot be stored; store epoch integers (e.g. microseconds) as "integer" with format "int64"`, format)
		default:
			return fail(`format %q is not an integer width; use "int32" or "int64" (the default)`, format)
		}
	case "number":
		switch format {
		case "", "double":
			n.kind = kFloat64
		case "float":
			n.kind = kFloat32
		default:
			return fail(`format %q is not a number width; use "float" (float32) or "double" (float64, the default)`, format)
		}
	case "string":
		if ev := v.get("contentEncoding"); ev != nil {
			if ev.kind != 's' {
				return fail(`"contentEncoding" must be a string, got %s`, ev.kindName())
			}
			switch ev.str {
			case "base16":
				n.enc = EncodingBase16
			case "base64":
				n.enc = EncodingBase64
			default:
				return fail(`contentEncoding %q cannot be stored; binary columns use "base16" or "base64"`, ev.str)
			}
			n.kind = kBinary
			if format != "" {
				size, ok := parseBytesN(format)
				if !ok {
					return fail(`format %q does not apply to binary; use "bytesN" (e.g. "bytes16") for a fixed size, or no format`, format)
				}
				n.kind, n.size = kFixed, size
			}
			break
		}
		n.kind = kString
		switch {
		case format == "":
		case format == "date-time" || format == "date" || format == "time":
			return fail(`format %q cannot be stored; store epoch integers (e.g. microseconds) as "integer" with format "int64"`, format)
		case strings.HasPrefix(format, "bytes"):
			return fail(`format %q needs "contentEncoding": "base16" or "base64"`, format)
		default:
			return fail(`format %q is not supported on a string; drop it (a string column is stored as text)`, format)
		}
	case "object":
		props, addl := v.get("properties"), v.get("additionalProperties")
		if addl != nil && addl.kind == 'b' && addl.str == "true" {
			return fail(`"additionalProperties": true cannot be stored: every key must have a declared type; declare the keys in "properties", or give "additionalProperties" a schema to make a map`)
		}
		if addl != nil && addl.kind != 'b' && addl.kind != 'o' {
			return fail(`"additionalProperties" must be false or a schema, got %s`, addl.kindName())
		}
		switch {
		case props != nil && addl != nil && addl.kind == 'o':
			return fail(`has both "properties" and an "additionalProperties" schema; an object is either a struct (properties) or a map (additionalProperties), not both`)
		case props != nil:
			if err := compileStruct(n, v, props, path, depth); err != nil {
				return nil, err
			}
		case addl != nil && addl.kind == 'o':
			if v.get("required") != nil {
				return fail(`keyword "required" does not apply to a map (an object with an "additionalProperties" schema)`)
			}
			elem, err := compileNode(addl, path+"{}", depth+1)
			if err != nil {
				return nil, err
			}
			elem.required = true
			n.kind, n.elem = kMap, elem
		default:
			return fail(`an object needs "properties" (a struct) or an "additionalProperties" schema (a map)`)
		}
	case "array":
		iv := v.get("items")
		if iv == nil {
			return fail(`an array needs "items", the schema of its elements`)
		}
		if iv.kind != 'o' {
			return fail(`"items" must be one schema (an object), got %s`, iv.kindName())
		}
		elem, err := compileNode(iv, path+"[]", depth+1)
		if err != nil {
			return nil, err
		}
		elem.required = true
		n.kind, n.elem = kList, elem
	}
	return n, nil
}

func compileStruct(n *node, v, props *jvalue, path string, depth int) error {
	fail := func(format string, args ...any) error {
		return &CompileError{Path: path, Problem: fmt.Sprintf(format, args...)}
	}
	if props.kind != 'o' {
		return fail(`"properties" must be an object, got %s`, props.kindName())
	}
	if len(props.members) == 0 {
		if path == "" {
			return fail(`"properties" is empty: a stream needs at least one column (a stream with no schema accepts any object)`)
		}
		return fail(`"properties" is empty: a struct needs at least one field`)
	}
	required := map[string]bool{}
	if rv := v.get("required"); rv != nil {
		if rv.kind != 'a' {
			return fail(`"required" must be an array of property names, got %s`, rv.kindName())
		}
		for _, it := range rv.items {
			if it.kind != 's' {
				return fail(`"required" must hold property names (strings), got %s`, it.kindName())
			}
			if required[it.str] {
				return fail(`"required" lists %q twice`, it.str)
			}
			if props.get(it.str) == nil {
				return fail(`"required" lists %q, which is not in "properties"`, it.str)
			}
			required[it.str] = true
		}
	}
	n.kind = kStruct
	for _, m := range props.members {
		child := joinPath(path, m.key)
		if path != "" && strings.HasPrefix(m.key, "[") {
			child = path + "." + m.key
		}
		if m.key == "" {
			return &CompileError{Path: path, Problem: "has a property with an empty name"}
		}
		if path == "" && (m.key == ColumnOffset || m.key == ColumnTS) {
			return &CompileError{Path: child, Problem: "is a reserved name: streamcast adds the system columns streamcast_offset and streamcast_ts itself; rename the property"}
		}
		f, err := compileNode(m.val, child, depth+1)
		if err != nil {
			return err
		}
		f.name = m.key
		f.required = required[m.key]
		if !f.required && !f.nullable {
			return &CompileError{Path: child, Problem: fmt.Sprintf(`optional with type %s cannot be stored: a stream cannot hold "absent, but never null"; add it to "required", or make its type ["%s","null"]`,
				f.typeText(), f.kind.typeWord())}
		}
		n.fields = append(n.fields, f)
	}
	return nil
}

// parseType reads "type": one type name, or [T, "null"] in either order.
func parseType(tv *jvalue) (typ string, nullable bool, problem string) {
	valid := func(t string) bool {
		switch t {
		case "integer", "number", "boolean", "string", "object", "array", "null":
			return true
		}
		return false
	}
	switch tv.kind {
	case 's':
		if !valid(tv.str) {
			return "", false, fmt.Sprintf(`type %q is not a JSON Schema type (integer, number, boolean, string, object, array, null)`, tv.str)
		}
		if tv.str == "null" {
			return "", false, `type "null" alone cannot be stored: a column that is always null holds nothing; give it a type, e.g. ["string","null"]`
		}
		return tv.str, false, ""
	case 'a':
		var types []string
		seen := map[string]bool{}
		for _, it := range tv.items {
			if it.kind != 's' {
				return "", false, `"type" must be a type name or an array of them, got an array holding ` + it.kindName()
			}
			if !valid(it.str) {
				return "", false, fmt.Sprintf(`type %q is not a JSON Schema type (integer, number, boolean, string, object, array, null)`, it.str)
			}
			if seen[it.str] {
				return "", false, fmt.Sprintf(`"type" lists %q twice`, it.str)
			}
			seen[it.str] = true
			if it.str == "null" {
				nullable = true
				continue
			}
			types = append(types, it.str)
		}
		switch len(types) {
		case 0:
			if nullable {
				return "", false, `type ["null"] cannot be stored: a column that is always null holds nothing; give it a type, e.g. ["string","null"]`
			}
			return "", false, `"type" is an empty array`
		case 1:
			return types[0], nullable, ""
		}
		q := make([]string, len(types))
		for i, t := range types {
			q[i] = strconv.Quote(t)
		}
		return "", false, fmt.Sprintf(`a union of %s cannot be stored as one column; use a single type (plus "null" if it may be null)`, strings.Join(q, " and "))
	}
	return "", false, `"type" must be a type name or an array of them, got ` + tv.kindName()
}

// parseBytesN reads "bytesN" with N a positive decimal without leading zeros.
func parseBytesN(format string) (int, bool) {
	d, ok := strings.CutPrefix(format, "bytes")
	if !ok || d == "" || d[0] == '0' || len(d) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range []byte(d) {
		if !jsontext.IsDigit(c) {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

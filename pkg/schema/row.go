package schema

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/streamcast/streamcast/pkg/schema/jsontext"
)

// RowError is a row that was refused. Path names the column, with a dotted
// path for a struct field ("res.service"), [i] for a list element
// ("tags[3]") and ["key"] for a map value (`attrs["env"]`); it is empty when
// the problem is the row as a whole (not an object, malformed JSON around
// the columns). Callers use errors.As.
type RowError struct {
	Path    string
	Problem string
}

// Error words the refusal: column "path": problem (row: problem for the
// row as a whole).
func (e *RowError) Error() string {
	if e.Path == "" {
		return "row: " + e.Problem
	}
	return "column " + strconv.Quote(e.Path) + ": " + e.Problem
}

// Row is a decoded, validated row; reuse one Row across calls to avoid
// allocations. Its contents are valid until the next Decode into it.
type Row struct {
	// Canonical is the canonical JSON object: the declared columns in
	// schema order, an omitted nullable column as null, every value in its
	// one canonical form. For the Any schema it is the input, unchanged.
	Canonical []byte

	schema *Schema
	dec    decoder
}

// Schema returns the schema that decoded r (nil before the first Decode).
func (r *Row) Schema() *Schema { return r.schema }

// Value returns the canonical JSON of top-level column col ("null" for a
// null), or nil when col is out of range or the row has no columns (Any).
// The bytes alias r.Canonical.
func (r *Row) Value(col int) []byte {
	if r.schema == nil || r.schema.any || col < 0 || col >= len(r.dec.spans) {
		return nil
	}
	sp := r.dec.spans[col]
	return r.Canonical[sp.start:sp.end]
}

type span struct{ start, end int }

// decoder is the reusable state of one row decode.
type decoder struct {
	data    []byte
	pos     int
	scratch []byte // a decoded string with escapes
	bin     []byte // decoded base64, to check it
	stack   []int  // positions of values, for objects whose keys are out of order
	keys    []span // map keys written so far, to refuse duplicates
	spans   []span // top-level column values in the output
}

var decoderPool = sync.Pool{New: func() any { return new(decoder) }}

// Decode validates data, one row as a JSON object, and stores its canonical
// encoding (and the column values, for filters) in dst. A refused row
// returns a *RowError naming the column and the problem, and leaves dst
// empty.
//
// The canonical encoding: the declared columns in schema order (struct
// fields likewise, map entries in the order given), no whitespace, an
// absent optional column as null; integers in plain digits; floats as the
// shortest decimal that reads back as the same float64 (float32 for a
// "float" column), in plain notation keeping ".0" when integral (85565.0,
// -0.0, 0.000001) for 1e-6 <= |x| < 1e21 and in exponent notation otherwise
// (1e+21, 1.5e-7); strings with only '"', '\' and control characters
// escaped (\b \f \n \r \t, others \u00xx), no HTML escaping, other text as
// UTF-8; base16 lowercase; base64 standard and padded.
//
// Decided here, beyond the schema's types: an integer column takes any
// number whose value is an exact integer, as JSON Schema's "integer" does
// (1.0, 1e3 and 12.5e1 are 1, 1000 and 125; 1.5 and 1e-3 are refused); a
// number column takes integers too (85565 is 85565.0), rounds to the nearest
// float64 or float32 (so 1e-400 is 0.0), and refuses what overflows; strings
// must be valid UTF-8 and lone \u surrogates are refused; base16 takes
// either case; base64 must be strict (padded, no line breaks, zero trailing
// bits); a duplicate key anywhere is refused, as is a map given as an array
// of pairs.
func (s *Schema) Decode(dst *Row, data []byte) error {
	dst.schema = s
	out, err := s.appendRow(&dst.dec, dst.Canonical[:0], data)
	dst.Canonical = out
	if err != nil {
		// A refused row holds nothing: no bytes, no values, no schema.
		dst.Canonical = dst.Canonical[:0]
		dst.dec.spans = dst.dec.spans[:0]
		dst.schema = nil
	}
	return err
}

// AppendCanonical is Decode that appends the canonical bytes to dst instead
// of filling a Row. On error dst is returned unchanged.
func (s *Schema) AppendCanonical(dst, data []byte) ([]byte, error) {
	d := decoderPool.Get().(*decoder)
	out, err := s.appendRow(d, dst, data)
	decoderPool.Put(d)
	if err != nil {
		return dst, err
	}
	return out, nil
}

func (s *Schema) appendRow(d *decoder, out, data []byte) ([]byte, error) {
	if s.any {
		return appendAny(out, data)
	}
	d.data = data
	d.stack = d.stack[:0]
	d.keys = d.keys[:0]
	n := len(s.root.fields)
	if cap(d.spans) < n {
		d.spans = make([]span, n)
	}
	d.spans = d.spans[:n]
	pos := jsontext.SkipWS(data, 0)
	if pos >= len(data) || data[pos] != '{' {
		return out, &RowError{Problem: "expected a JSON object, got " + jsontext.Describe(data, pos)}
	}
	d.pos = pos
	out, err := d.structValue(s.root, out, true)
	d.data = nil
	if err != nil {
		return out, err
	}
	if p := jsontext.SkipWS(data, d.pos); p != len(data) {
		return out, &RowError{Problem: "unexpected text after the row's object" + jsontext.GotAt(data, p)}
	}
	return out, nil
}

// appendAny checks that data is one well-formed JSON object and appends it
// unchanged: a stream without a schema relays what it was given.
func appendAny(out, data []byte) ([]byte, error) {
	pos := jsontext.SkipWS(data, 0)
	if pos >= len(data) || data[pos] != '{' {
		return out, &RowError{Problem: "expected a JSON object, got " + jsontext.Describe(data, pos)}
	}
	end, prob := jsontext.SkipValue(data, pos, 0)
	if prob != "" {
		return out, &RowError{Problem: jsontext.Problem(prob)}
	}
	if p := jsontext.SkipWS(data, end); p != len(data) {
		return out, &RowError{Problem: "unexpected text after the row's object" + jsontext.GotAt(data, p)}
	}
	return append(out, data...), nil
}

// wrap prefixes the path of a row error with a parent segment.
func wrap(err error, seg string) error {
	if re, ok := err.(*RowError); ok {
		re.Path = joinPath(seg, re.Path)
	}
	return err
}

func syntaxErr(prob string) error {
	return &RowError{Problem: jsontext.Problem(prob)}
}

func (d *decoder) wrongType(n *node) error {
	return &RowError{Problem: "expected " + n.wants() + ", got " + jsontext.Describe(d.data, d.pos)}
}

// structValue decodes the object at d.pos into out, fields in schema order.
// Publishers almost always send the keys in schema order (perhaps leaving
// out nullable ones), and that case is decoded in one pass straight into out;
// anything else (keys out of order, escaped keys, unknown or duplicate keys,
// malformed JSON) is handled by structSlow, which also words the errors.
func (d *decoder) structValue(n *node, out []byte, top bool) ([]byte, error) {
	start, outStart := d.pos, len(out)
	out, ok, err := d.structFast(n, out, top)
	if err != nil || ok {
		return out, err
	}
	d.pos = start
	return d.structSlow(n, out[:outStart], top)
}

func (d *decoder) structFast(n *node, out []byte, top bool) ([]byte, bool, error) {
	data, fields := d.data, n.fields
	out = append(out, '{')
	pos := jsontext.SkipWS(data, d.pos+1)
	next := 0
	if pos < len(data) && data[pos] == '}' {
		pos++
	} else {
		for {
			if pos >= len(data) || data[pos] != '"' {
				return out, false, nil
			}
			kend, simple := jsontext.ScanSimpleString(data, pos)
			if !simple {
				return out, false, nil
			}
			key := data[pos+1 : kend-1]
			j := next
			for ; j < len(fields); j++ {
				if fields[j].name == string(key) {
					break
				}
				if fields[j].required {
					return out, false, nil
				}
			}
			if j == len(fields) {
				return out, false, nil
			}
			for ; next < j; next++ {
				out = d.null(out, fields, next, top)
			}
			pos = jsontext.SkipWS(data, kend)
			if pos >= len(data) || data[pos] != ':' {
				return out, false, nil
			}
			if j > 0 {
				out = append(out, ',')
			}
			out = append(out, fields[j].key...)
			vs := len(out)
			d.pos = jsontext.SkipWS(data, pos+1)
			var err error
			if out, err = d.value(fields[j], out); err != nil {
				return out, false, wrap(err, fields[j].name)
			}
			if top {
				d.spans[j] = span{vs, len(out)}
			}
			next = j + 1
			pos = jsontext.SkipWS(data, d.pos)
			if pos < len(data) && data[pos] == ',' {
				pos = jsontext.SkipWS(data, pos+1)
				continue
			}
			if pos < len(data) && data[pos] == '}' {
				pos++
				break
			}
			return out, false, nil
		}
	}
	for ; next < len(fields); next++ {
		if fields[next].required {
			return out, false, nil
		}
		out = d.null(out, fields, next, top)
	}
	d.pos = pos
	return append(out, '}'), true, nil
}

// null writes field k of an object as null.
func (d *decoder) null(out []byte, fields []*node, k int, top bool) []byte {
	if k > 0 {
		out = append(out, ',')
	}
	out = append(out, fields[k].key...)
	if top {
		d.spans[k] = span{len(out), len(out) + 4}
	}
	return append(out, "null"...)
}

func (d *decoder) structSlow(n *node, out []byte, top bool) ([]byte, error) {
	base := len(d.stack)
	for range n.fields {
		d.stack = append(d.stack, -1)
	}
	out, err := d.structSlowBody(n, out, top, base)
	d.stack = d.stack[:base]
	return out, err
}

func (d *decoder) structSlowBody(n *node, out []byte, top bool, base int) ([]byte, error) {
	data, fields := d.data, n.fields
	pos := jsontext.SkipWS(data, d.pos+1)
	if pos < len(data) && data[pos] == '}' {
		pos++
	} else {
		for {
			if pos >= len(data) || data[pos] != '"' {
				return out, syntaxErr("expected a string key" + jsontext.GotAt(data, pos))
			}
			var key []byte
			kend, simple := jsontext.ScanSimpleString(data, pos)
			if simple {
				key = data[pos+1 : kend-1]
			} else {
				var prob string
				d.scratch, kend, prob = jsontext.DecodeString(data, pos, d.scratch[:0])
				if prob != "" {
					return out, syntaxErr(prob)
				}
				key = d.scratch
			}
			idx, ok := n.index[string(key)]
			if !ok {
				return out, d.unknownKey(n, string(key), top)
			}
			if d.stack[base+idx] >= 0 {
				return out, &RowError{Path: string(key), Problem: "given twice; each key may appear once in an object"}
			}
			pos = jsontext.SkipWS(data, kend)
			if pos >= len(data) || data[pos] != ':' {
				return out, syntaxErr("expected ':' after a key" + jsontext.GotAt(data, pos))
			}
			pos = jsontext.SkipWS(data, pos+1)
			d.stack[base+idx] = pos
			end, prob := jsontext.SkipValue(data, pos, 0)
			if prob != "" {
				return out, &RowError{Path: string(key), Problem: jsontext.Problem(prob)}
			}
			pos = jsontext.SkipWS(data, end)
			if pos < len(data) && data[pos] == ',' {
				pos = jsontext.SkipWS(data, pos+1)
				continue
			}
			if pos < len(data) && data[pos] == '}' {
				pos++
				break
			}
			return out, syntaxErr("expected ',' or '}' in an object" + jsontext.GotAt(data, pos))
		}
	}
	end := pos
	out = append(out, '{')
	for k, f := range fields {
		if k > 0 {
			out = append(out, ',')
		}
		out = append(out, f.key...)
		vs := len(out)
		if p := d.stack[base+k]; p < 0 {
			if f.required {
				return out, missing(f)
			}
			out = append(out, "null"...)
		} else {
			d.pos = p
			var err error
			if out, err = d.value(f, out); err != nil {
				return out, wrap(err, f.name)
			}
		}
		if top {
			d.spans[k] = span{vs, len(out)}
		}
	}
	d.pos = end
	return append(out, '}'), nil
}

func missing(f *node) error {
	if f.nullable {
		return &RowError{Path: f.name, Problem: `missing; it is in "required", so the key must be present (its value may be null)`}
	}
	return &RowError{Path: f.name, Problem: "missing; it is required (" + f.wants() + ")"}
}

func (d *decoder) unknownKey(n *node, key string, top bool) error {
	names := make([]string, len(n.fields))
	for i, f := range n.fields {
		names[i] = f.name
	}
	list := strings.Join(names, ", ")
	if len(list) > 200 {
		list = list[:197] + "..."
	}
	if top {
		if key == ColumnOffset || key == ColumnTS {
			return &RowError{Path: key, Problem: "is set by streamcast itself (a system column); a row cannot supply it"}
		}
		return &RowError{Path: key, Problem: "no such column in this stream (declared: " + list + ")"}
	}
	return &RowError{Path: key, Problem: "no such property in this object (declared: " + list + ")"}
}

// value decodes the value at d.pos, of node n, appending its canonical form.
func (d *decoder) value(n *node, out []byte) ([]byte, error) {
	data, pos := d.data, d.pos
	if pos >= len(data) {
		return out, &RowError{Problem: "unexpected end of input, expected " + n.wants()}
	}
	c := data[pos]
	if c == 'n' {
		if !jsontext.HasLit(data, pos, "null") {
			return out, syntaxErr("expected a value" + jsontext.GotAt(data, pos))
		}
		if !n.nullable {
			return out, &RowError{Problem: "null, but its type is " + n.typeText() + `, which does not allow null (add "null" to the type to allow it)`}
		}
		d.pos = pos + 4
		return append(out, "null"...), nil
	}
	switch n.kind {
	case kInt64, kInt32:
		if c != '-' && !jsontext.IsDigit(c) {
			return out, d.wrongType(n)
		}
		end, plain, ok := jsontext.ScanNumber(data, pos)
		if !ok {
			return out, syntaxErr("malformed number" + jsontext.GotAt(data, end))
		}
		tok := data[pos:end]
		if plain && len(tok) <= 18 {
			v := jsontext.ParsePlainInt(tok)
			if n.kind == kInt32 && (v < math.MinInt32 || v > math.MaxInt32) {
				return out, int32Range(tok)
			}
			if v == 0 {
				out = append(out, '0') // -0 is 0
			} else {
				out = append(out, tok...)
			}
		} else {
			v, p := jsontext.ExactInt(tok)
			switch {
			case p == jsontext.IntFraction:
				return out, &RowError{Problem: string(tok) + " is not an integer; the column's type is \"integer\""}
			case p == jsontext.IntRange:
				return out, &RowError{Problem: string(tok) + " is out of range for int64 [-9223372036854775808, 9223372036854775807]"}
			case n.kind == kInt32 && (v < math.MinInt32 || v > math.MaxInt32):
				return out, int32Range(tok)
			}
			out = strconv.AppendInt(out, v, 10)
		}
		d.pos = end
		return out, nil
	case kFloat64, kFloat32:
		if c != '-' && !jsontext.IsDigit(c) {
			return out, d.wrongType(n)
		}
		end, _, ok := jsontext.ScanNumber(data, pos)
		if !ok {
			return out, syntaxErr("malformed number" + jsontext.GotAt(data, end))
		}
		tok := data[pos:end]
		bits, digits := 64, 15
		if n.kind == kFloat32 {
			bits, digits = 32, 6
		}
		if dot, ok := jsontext.CanonicalFloatToken(tok, digits); ok {
			d.pos = end
			out = append(out, tok...)
			if dot {
				out = append(out, '.', '0')
			}
			return out, nil
		}
		f, err := strconv.ParseFloat(jsontext.UnsafeString(tok), bits)
		if err != nil {
			if bits == 32 {
				return out, &RowError{Problem: string(tok) + " is out of range for float32 (±3.4028235e+38)"}
			}
			return out, &RowError{Problem: string(tok) + " is not a finite number: it is beyond float64's range (±1.7976931348623157e+308)"}
		}
		d.pos = end
		return jsontext.AppendFloat(out, f, bits), nil
	case kBool:
		switch {
		case c == 't' && jsontext.HasLit(data, pos, "true"):
			d.pos = pos + 4
			return append(out, "true"...), nil
		case c == 'f' && jsontext.HasLit(data, pos, "false"):
			d.pos = pos + 5
			return append(out, "false"...), nil
		}
		return out, d.wrongType(n)
	case kString:
		if c != '"' {
			return out, d.wrongType(n)
		}
		if end, ok := jsontext.ScanSimpleString(data, pos); ok {
			d.pos = end
			return append(out, data[pos:end]...), nil
		}
		var end int
		var prob string
		d.scratch, end, prob = jsontext.DecodeString(data, pos, d.scratch[:0])
		if prob != "" {
			return out, &RowError{Problem: prob}
		}
		d.pos = end
		return jsontext.AppendString(out, d.scratch), nil
	case kBinary, kFixed:
		if c != '"' {
			return out, d.wrongType(n)
		}
		return d.binary(n, out)
	case kStruct:
		if c != '{' {
			return out, d.wrongType(n)
		}
		return d.structValue(n, out, false)
	case kList:
		if c != '[' {
			return out, d.wrongType(n)
		}
		return d.list(n, out)
	case kMap:
		if c == '[' {
			return out, &RowError{Problem: "expected an object (a map), got an array; a list of [key, value] pairs is not accepted, because it would be replayed as an object"}
		}
		if c != '{' {
			return out, d.wrongType(n)
		}
		return d.mapValue(n, out)
	}
	return out, &RowError{Problem: "unsupported column kind"}
}

func int32Range(tok []byte) error {
	return &RowError{Problem: string(tok) + " is out of range for int32 [-2147483648, 2147483647]"}
}

func (d *decoder) binary(n *node, out []byte) ([]byte, error) {
	data, pos := d.data, d.pos
	var text []byte
	end, simple := jsontext.ScanSimpleString(data, pos)
	if simple {
		text = data[pos+1 : end-1]
	} else {
		var prob string
		d.scratch, end, prob = jsontext.DecodeString(data, pos, d.scratch[:0])
		if prob != "" {
			return out, &RowError{Problem: prob}
		}
		text = d.scratch
	}
	var size int
	if n.enc == EncodingBase16 {
		if len(text)%2 != 0 {
			return out, &RowError{Problem: jsontext.Describe(data, pos) + " is not valid base16: it has an odd number of hex digits (" + strconv.Itoa(len(text)) + ")"}
		}
		mark := len(out)
		out = append(out, '"')
		for i, c := range text {
			if _, ok := jsontext.Unhex(c); !ok {
				return out[:mark], &RowError{Problem: jsontext.Describe(data, pos) + " is not valid base16: '" + jsontext.Printable(c) + "' at position " + strconv.Itoa(i) + " is not a hex digit"}
			}
			if c >= 'A' && c <= 'F' {
				c += 'a' - 'A'
			}
			out = append(out, c)
		}
		out = append(out, '"')
		size = len(text) / 2
	} else {
		if i := bytes.IndexAny(text, "\r\n"); i >= 0 {
			return out, &RowError{Problem: jsontext.Describe(data, pos) + " is not valid base64: a line break at position " + strconv.Itoa(i)}
		}
		need := b64.DecodedLen(len(text))
		if cap(d.bin) < need {
			d.bin = make([]byte, need)
		}
		nb, err := b64.Decode(d.bin[:need], text)
		if err != nil {
			return out, &RowError{Problem: jsontext.Describe(data, pos) + " is not valid base64 (standard alphabet, padded): " + strings.TrimPrefix(err.Error(), "illegal base64 data ")}
		}
		size = nb
		out = append(out, '"')
		out = append(out, text...)
		out = append(out, '"')
	}
	if n.kind == kFixed && size != n.size {
		return out, &RowError{Problem: "holds " + strconv.Itoa(size) + " bytes, but its format \"bytes" + strconv.Itoa(n.size) + "\" needs exactly " + strconv.Itoa(n.size)}
	}
	d.pos = end
	return out, nil
}

func (d *decoder) list(n *node, out []byte) ([]byte, error) {
	data := d.data
	out = append(out, '[')
	pos := jsontext.SkipWS(data, d.pos+1)
	if pos < len(data) && data[pos] == ']' {
		d.pos = pos + 1
		return append(out, ']'), nil
	}
	for i := 0; ; i++ {
		if i > 0 {
			out = append(out, ',')
		}
		d.pos = pos
		var err error
		if out, err = d.value(n.elem, out); err != nil {
			return out, wrap(err, "["+strconv.Itoa(i)+"]")
		}
		pos = jsontext.SkipWS(data, d.pos)
		if pos < len(data) && data[pos] == ',' {
			pos = jsontext.SkipWS(data, pos+1)
			continue
		}
		if pos < len(data) && data[pos] == ']' {
			d.pos = pos + 1
			return append(out, ']'), nil
		}
		return out, syntaxErr("expected ',' or ']' in an array" + jsontext.GotAt(data, pos))
	}
}

// dupMapLimit is the number of keys past which a map's duplicate check
// switches from comparing with every earlier key to a hash set.
const dupMapLimit = 32

func (d *decoder) mapValue(n *node, out []byte) ([]byte, error) {
	base := len(d.keys)
	out, err := d.mapBody(n, out, base)
	d.keys = d.keys[:base]
	return out, err
}

func (d *decoder) mapBody(n *node, out []byte, base int) ([]byte, error) {
	data := d.data
	out = append(out, '{')
	pos := jsontext.SkipWS(data, d.pos+1)
	if pos < len(data) && data[pos] == '}' {
		d.pos = pos + 1
		return append(out, '}'), nil
	}
	var seen map[string]struct{}
	for i := 0; ; i++ {
		if pos >= len(data) || data[pos] != '"' {
			return out, syntaxErr("expected a string key" + jsontext.GotAt(data, pos))
		}
		if i > 0 {
			out = append(out, ',')
		}
		ks := len(out)
		if end, ok := jsontext.ScanSimpleString(data, pos); ok {
			out = append(out, data[pos:end]...)
			pos = end
		} else {
			var prob string
			d.scratch, pos, prob = jsontext.DecodeString(data, pos, d.scratch[:0])
			if prob != "" {
				return out, syntaxErr(prob)
			}
			out = jsontext.AppendString(out, d.scratch)
		}
		key := out[ks:]
		dup := false
		if seen != nil {
			_, dup = seen[string(key)]
			seen[string(key)] = struct{}{}
		} else {
			for _, k := range d.keys[base:] {
				if bytes.Equal(out[k.start:k.end], key) {
					dup = true
					break
				}
			}
			d.keys = append(d.keys, span{ks, len(out)})
			if len(d.keys)-base > dupMapLimit {
				seen = make(map[string]struct{}, 2*dupMapLimit)
				for _, k := range d.keys[base:] {
					seen[string(out[k.start:k.end])] = struct{}{}
				}
			}
		}
		if dup {
			return out, &RowError{Path: "[" + string(key) + "]", Problem: "given twice; each key may appear once in a map"}
		}
		pos = jsontext.SkipWS(data, pos)
		if pos >= len(data) || data[pos] != ':' {
			return out, syntaxErr("expected ':' after a key" + jsontext.GotAt(data, pos))
		}
		out = append(out, ':')
		d.pos = jsontext.SkipWS(data, pos+1)
		var err error
		if out, err = d.value(n.elem, out); err != nil {
			return out, wrap(err, "["+string(out[ks:ks+len(key)])+"]")
		}
		pos = jsontext.SkipWS(data, d.pos)
		if pos < len(data) && data[pos] == ',' {
			pos = jsontext.SkipWS(data, pos+1)
			continue
		}
		if pos < len(data) && data[pos] == '}' {
			d.pos = pos + 1
			return append(out, '}'), nil
		}
		return out, syntaxErr("expected ',' or '}' in an object" + jsontext.GotAt(data, pos))
	}
}

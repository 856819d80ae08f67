package schema

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/streamcast/streamcast/pkg/schema/jsontext"
)

// appendFunc appends the canonical value at p.pos to a builder of the
// column's type. Each column gets its own at compile time, so the type is
// decided once per column, not per value.
type appendFunc func(b array.Builder, p *cparser) error

// encodeFunc appends the canonical JSON of non-null row i of arr.
type encodeFunc func(dst []byte, arr arrow.Array, i int) []byte

// cparser reads canonical rows. They were produced by Decode, so the parse
// can trust their shape (no whitespace, keys in schema order, values in
// canonical form); it still checks every byte it relies on, so a corrupt row
// is an error, never a panic or a silently different value.
type cparser struct {
	data []byte
	pos  int
	tmp  []byte // unescaped strings
	bin  []byte // decoded binary
}

// cparsers are pooled: the appenders are called through function values, so
// a parser passed to them lives on the heap, and reusing one keeps
// AppendArrow free of allocations.
var cparserPool = sync.Pool{New: func() any { return new(cparser) }}

func (p *cparser) fail(what string) error {
	return fmt.Errorf("schema: canonical row is malformed at byte %d: expected %s", p.pos, what)
}

func (p *cparser) lit(s string) bool {
	if jsontext.HasLit(p.data, p.pos, s) {
		p.pos += len(s)
		return true
	}
	return false
}

func (p *cparser) null() bool {
	return p.pos < len(p.data) && p.data[p.pos] == 'n' && p.lit("null")
}

// number returns the number token at p.pos.
func (p *cparser) number() ([]byte, error) {
	end, _, ok := jsontext.ScanNumber(p.data, p.pos)
	if !ok {
		return nil, p.fail("a number")
	}
	tok := p.data[p.pos:end]
	p.pos = end
	return tok, nil
}

// str returns the text of the string at p.pos, unescaped (in p.tmp when it
// has escapes).
func (p *cparser) str() ([]byte, error) {
	data, pos := p.data, p.pos
	if pos >= len(data) || data[pos] != '"' {
		return nil, p.fail("a string")
	}
	for i := pos + 1; i < len(data); i++ {
		switch data[i] {
		case '"':
			p.pos = i + 1
			return data[pos+1 : i], nil
		case '\\':
			var prob string
			var end int
			p.tmp, end, prob = jsontext.DecodeString(data, pos, p.tmp[:0])
			if prob != "" {
				return nil, p.fail("a valid string (" + prob + ")")
			}
			p.pos = end
			return p.tmp, nil
		}
	}
	return nil, p.fail("a closed string")
}

func (p *cparser) int64() (int64, error) {
	// Fast path: canonical integers are plain digits.
	data, i := p.data, p.pos
	neg := i < len(data) && data[i] == '-'
	if neg {
		i++
	}
	start := i
	var v int64
	for i < len(data) && i-start < 18 && jsontext.IsDigit(data[i]) {
		v = v*10 + int64(data[i]-'0')
		i++
	}
	if i > start && (i == len(data) || (!jsontext.IsDigit(data[i]) && data[i] != '.' && data[i] != 'e' && data[i] != 'E')) {
		p.pos = i
		if neg {
			return -v, nil
		}
		return v, nil
	}
	tok, err := p.number()
	if err != nil {
		return 0, err
	}
	v, prob := jsontext.ExactInt(tok)
	if prob != jsontext.IntOK {
		return 0, p.fail("an int64")
	}
	return v, nil
}

func (p *cparser) float(bits int) (float64, error) {
	if f, n, ok := jsontext.ParseShortFloatPrefix(p.data[p.pos:], bits); ok {
		p.pos += n
		return f, nil
	}
	tok, err := p.number()
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(jsontext.UnsafeString(tok), bits)
	if err != nil {
		return 0, p.fail("a finite number")
	}
	return f, nil
}

func (p *cparser) binary(enc Encoding) ([]byte, error) {
	text, err := p.str()
	if err != nil {
		return nil, err
	}
	if enc == EncodingBase16 {
		p.bin, err = hex.AppendDecode(p.bin[:0], text)
	} else {
		p.bin, err = b64.AppendDecode(p.bin[:0], text)
	}
	if err != nil {
		return nil, p.fail(enc.String() + " text")
	}
	return p.bin, nil
}

func builderError(b array.Builder, n *node) error {
	return fmt.Errorf("schema: builder %T cannot hold %s", b, n.dtype)
}

func newAppender(n *node) appendFunc {
	nullable := func(b array.Builder, p *cparser, f func() error) error {
		if p.null() {
			b.AppendNull()
			return nil
		}
		return f()
	}
	switch n.kind {
	case kBool:
		return func(b array.Builder, p *cparser) error {
			bb, ok := b.(*array.BooleanBuilder)
			if !ok {
				return builderError(b, n)
			}
			switch {
			case p.lit("true"):
				bb.Append(true)
			case p.lit("false"):
				bb.Append(false)
			case p.null():
				bb.AppendNull()
			default:
				return p.fail("a boolean")
			}
			return nil
		}
	case kInt64:
		return func(b array.Builder, p *cparser) error {
			ib, ok := b.(*array.Int64Builder)
			if !ok {
				return builderError(b, n)
			}
			if p.null() {
				ib.AppendNull()
				return nil
			}
			v, err := p.int64()
			if err != nil {
				return err
			}
			ib.Append(v)
			return nil
		}
	case kInt32:
		return func(b array.Builder, p *cparser) error {
			ib, ok := b.(*array.Int32Builder)
			if !ok {
				return builderError(b, n)
			}
			if p.null() {
				ib.AppendNull()
				return nil
			}
			v, err := p.int64()
			if err != nil {
				return err
			}
			if v < math.MinInt32 || v > math.MaxInt32 {
				return p.fail("an int32")
			}
			ib.Append(int32(v))
			return nil
		}
	case kFloat64:
		return func(b array.Builder, p *cparser) error {
			fb, ok := b.(*array.Float64Builder)
			if !ok {
				return builderError(b, n)
			}
			if p.null() {
				fb.AppendNull()
				return nil
			}
			f, err := p.float(64)
			if err != nil {
				return err
			}
			fb.Append(f)
			return nil
		}
	case kFloat32:
		return func(b array.Builder, p *cparser) error {
			fb, ok := b.(*array.Float32Builder)
			if !ok {
				return builderError(b, n)
			}
			if p.null() {
				fb.AppendNull()
				return nil
			}
			f, err := p.float(32)
			if err != nil {
				return err
			}
			fb.Append(float32(f))
			return nil
		}
	case kString:
		return func(b array.Builder, p *cparser) error {
			sb, ok := b.(*array.StringBuilder)
			if !ok {
				return builderError(b, n)
			}
			if p.null() {
				sb.AppendNull()
				return nil
			}
			s, err := p.str()
			if err != nil {
				return err
			}
			sb.BinaryBuilder.Append(s)
			return nil
		}
	case kBinary:
		return func(b array.Builder, p *cparser) error {
			bb, ok := b.(*array.BinaryBuilder)
			if !ok {
				return builderError(b, n)
			}
			return nullable(b, p, func() error {
				v, err := p.binary(n.enc)
				if err != nil {
					return err
				}
				bb.Append(v)
				return nil
			})
		}
	case kFixed:
		return func(b array.Builder, p *cparser) error {
			fb, ok := b.(*array.FixedSizeBinaryBuilder)
			if !ok {
				return builderError(b, n)
			}
			return nullable(b, p, func() error {
				v, err := p.binary(n.enc)
				if err != nil {
					return err
				}
				if len(v) != n.size {
					return p.fail(strconv.Itoa(n.size) + " bytes")
				}
				fb.Append(v)
				return nil
			})
		}
	case kStruct:
		return func(b array.Builder, p *cparser) error {
			sb, ok := b.(*array.StructBuilder)
			if !ok || sb.NumField() != len(n.fields) {
				return builderError(b, n)
			}
			if p.null() {
				sb.AppendNull()
				return nil
			}
			sb.Append(true)
			return appendFields(n, p, sb.FieldBuilder)
		}
	case kList:
		return func(b array.Builder, p *cparser) error {
			lb, ok := b.(*array.ListBuilder)
			if !ok {
				return builderError(b, n)
			}
			if p.null() {
				lb.AppendNull()
				return nil
			}
			if !p.lit("[") {
				return p.fail("'['")
			}
			lb.Append(true)
			vb := lb.ValueBuilder()
			if p.lit("]") {
				return nil
			}
			for {
				if err := n.elem.appendArrow(vb, p); err != nil {
					return err
				}
				if p.lit(",") {
					continue
				}
				if p.lit("]") {
					return nil
				}
				return p.fail("',' or ']'")
			}
		}
	case kMap:
		return func(b array.Builder, p *cparser) error {
			mb, ok := b.(*array.MapBuilder)
			if !ok {
				return builderError(b, n)
			}
			kb, ok := mb.KeyBuilder().(*array.StringBuilder)
			if !ok {
				return builderError(b, n)
			}
			if p.null() {
				mb.AppendNull()
				return nil
			}
			if !p.lit("{") {
				return p.fail("'{'")
			}
			mb.Append(true)
			ib := mb.ItemBuilder()
			if p.lit("}") {
				return nil
			}
			for {
				k, err := p.str()
				if err != nil {
					return err
				}
				kb.BinaryBuilder.Append(k)
				if !p.lit(":") {
					return p.fail("':'")
				}
				if err := n.elem.appendArrow(ib, p); err != nil {
					return err
				}
				if p.lit(",") {
					continue
				}
				if p.lit("}") {
					return nil
				}
				return p.fail("',' or '}'")
			}
		}
	}
	panic("schema: unknown kind") // unreachable: kinds come from this package
}

// appendFields reads a canonical object of n's fields, each into its builder.
func appendFields(n *node, p *cparser, builder func(int) array.Builder) error {
	if !p.lit("{") {
		return p.fail("'{'")
	}
	for k, f := range n.fields {
		if k > 0 && !p.lit(",") {
			return p.fail("','")
		}
		if !bytes.HasPrefix(p.data[p.pos:], f.key) {
			return p.fail("the key " + string(f.key))
		}
		p.pos += len(f.key)
		if err := f.appendArrow(builder(k), p); err != nil {
			return err
		}
	}
	if !p.lit("}") {
		return p.fail("'}'")
	}
	return nil
}

// AppendArrow appends one canonical row (as produced by Decode) to
// builders, one per declared column in Columns() order (for example the
// leading fields of an array.RecordBuilder made from Arrow(), the caller
// filling the system columns). Canonical input is trusted to be canonical
// but checked as it is read: malformed bytes return an error, after which
// the builders may hold part of the row and should be discarded.
func (s *Schema) AppendArrow(builders []array.Builder, canonical []byte) error {
	if s.any {
		return fmt.Errorf("schema: a stream without a schema has no Arrow columns")
	}
	if len(builders) != len(s.root.fields) {
		return fmt.Errorf("schema: %d builders for %d columns", len(builders), len(s.root.fields))
	}
	p := cparserPool.Get().(*cparser)
	p.data, p.pos = canonical, 0
	err := appendFields(s.root, p, func(i int) array.Builder { return builders[i] })
	if err == nil && p.pos != len(canonical) {
		err = p.fail("the end of the row")
	}
	p.data = nil
	cparserPool.Put(p)
	return err
}

// AppendJSON appends row i of cols, the declared columns in Columns()
// order, as canonical JSON: byte-identical to what Decode produced for the
// same values (I4). Arrays must have the columns' types (those of Arrow()); a
// value that has no JSON form (an array of the wrong type, a NaN or
// infinite float from a foreign file) is written as null, and invalid UTF-8
// as U+FFFD.
func (s *Schema) AppendJSON(dst []byte, cols []arrow.Array, i int) []byte {
	dst = append(dst, '{')
	for k, f := range s.root.fields {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, f.key...)
		if k >= len(cols) || cols[k].IsNull(i) {
			dst = append(dst, "null"...)
			continue
		}
		dst = f.appendJSON(dst, cols[k], i)
	}
	return append(dst, '}')
}

func nullJSON(dst []byte) []byte { return append(dst, "null"...) }

func newEncoder(n *node) encodeFunc {
	switch n.kind {
	case kBool:
		return func(dst []byte, arr arrow.Array, i int) []byte {
			a, ok := arr.(*array.Boolean)
			if !ok {
				return nullJSON(dst)
			}
			if a.Value(i) {
				return append(dst, "true"...)
			}
			return append(dst, "false"...)
		}
	case kInt64:
		return func(dst []byte, arr arrow.Array, i int) []byte {
			a, ok := arr.(*array.Int64)
			if !ok {
				return nullJSON(dst)
			}
			return strconv.AppendInt(dst, a.Value(i), 10)
		}
	case kInt32:
		return func(dst []byte, arr arrow.Array, i int) []byte {
			a, ok := arr.(*array.Int32)
			if !ok {
				return nullJSON(dst)
			}
			return strconv.AppendInt(dst, int64(a.Value(i)), 10)
		}
	case kFloat64:
		return func(dst []byte, arr arrow.Array, i int) []byte {
			a, ok := arr.(*array.Float64)
			if !ok {
				return nullJSON(dst)
			}
			return jsontext.AppendFloat64(dst, a.Value(i))
		}
	case kFloat32:
		return func(dst []byte, arr arrow.Array, i int) []byte {
			a, ok := arr.(*array.Float32)
			if !ok {
				return nullJSON(dst)
			}
			return jsontext.AppendFloat32(dst, a.Value(i))
		}
	case kString:
		return func(dst []byte, arr arrow.Array, i int) []byte {
			a, ok := arr.(*array.String)
			if !ok {
				return nullJSON(dst)
			}
			return jsontext.AppendString(dst, jsontext.UnsafeBytes(a.Value(i)))
		}
	case kBinary:
		return func(dst []byte, arr arrow.Array, i int) []byte {
			a, ok := arr.(*array.Binary)
			if !ok {
				return nullJSON(dst)
			}
			return appendBinary(dst, a.Value(i), n.enc)
		}
	case kFixed:
		return func(dst []byte, arr arrow.Array, i int) []byte {
			a, ok := arr.(*array.FixedSizeBinary)
			if !ok {
				return nullJSON(dst)
			}
			return appendBinary(dst, a.Value(i), n.enc)
		}
	case kStruct:
		return func(dst []byte, arr arrow.Array, i int) []byte {
			a, ok := arr.(*array.Struct)
			if !ok || a.NumField() != len(n.fields) {
				return nullJSON(dst)
			}
			dst = append(dst, '{')
			for k, f := range n.fields {
				if k > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, f.key...)
				c := a.Field(k)
				if c.IsNull(i) {
					dst = append(dst, "null"...)
					continue
				}
				dst = f.appendJSON(dst, c, i)
			}
			return append(dst, '}')
		}
	case kList:
		return func(dst []byte, arr arrow.Array, i int) []byte {
			a, ok := arr.(*array.List)
			if !ok {
				return nullJSON(dst)
			}
			start, end := a.ValueOffsets(i)
			vals := a.ListValues()
			dst = append(dst, '[')
			for j := start; j < end; j++ {
				if j > start {
					dst = append(dst, ',')
				}
				if vals.IsNull(int(j)) {
					dst = append(dst, "null"...)
					continue
				}
				dst = n.elem.appendJSON(dst, vals, int(j))
			}
			return append(dst, ']')
		}
	case kMap:
		return func(dst []byte, arr arrow.Array, i int) []byte {
			a, ok := arr.(*array.Map)
			if !ok {
				return nullJSON(dst)
			}
			keys, ok := a.Keys().(*array.String)
			if !ok {
				return nullJSON(dst)
			}
			items := a.Items()
			start, end := a.ValueOffsets(i)
			dst = append(dst, '{')
			for j := start; j < end; j++ {
				if j > start {
					dst = append(dst, ',')
				}
				dst = jsontext.AppendString(dst, jsontext.UnsafeBytes(keys.Value(int(j))))
				dst = append(dst, ':')
				if items.IsNull(int(j)) {
					dst = append(dst, "null"...)
					continue
				}
				dst = n.elem.appendJSON(dst, items, int(j))
			}
			return append(dst, '}')
		}
	}
	panic("schema: unknown kind") // unreachable: kinds come from this package
}

// MinMax returns the smallest and largest non-null value of scalar column
// col in arr, as canonical JSON scalars, for pruning files with filters
// (see Filter.MayMatch). Strings and binary compare as bytes, booleans
// false < true. ok is false for struct, list and map columns, an array of
// the wrong type, an all-null array, and a float column holding NaN.
func (s *Schema) MinMax(col int, arr arrow.Array) (min, max []byte, ok bool) {
	if s.any || col < 0 || col >= len(s.root.fields) || arr == nil {
		return nil, nil, false
	}
	n := s.root.fields[col]
	lo, hi := -1, -1
	switch a := arr.(type) {
	case *array.Boolean:
		if n.kind != kBool {
			return nil, nil, false
		}
		lo, hi = extremes(a, func(i, j int) bool { return !a.Value(i) && a.Value(j) })
	case *array.Int64:
		if n.kind != kInt64 {
			return nil, nil, false
		}
		lo, hi = extremes(a, func(i, j int) bool { return a.Value(i) < a.Value(j) })
	case *array.Int32:
		if n.kind != kInt32 {
			return nil, nil, false
		}
		lo, hi = extremes(a, func(i, j int) bool { return a.Value(i) < a.Value(j) })
	case *array.Float64:
		if n.kind != kFloat64 {
			return nil, nil, false
		}
		for i := 0; i < a.Len(); i++ {
			if a.IsValid(i) && math.IsNaN(a.Value(i)) {
				return nil, nil, false
			}
		}
		lo, hi = extremes(a, func(i, j int) bool { return a.Value(i) < a.Value(j) })
	case *array.Float32:
		if n.kind != kFloat32 {
			return nil, nil, false
		}
		for i := 0; i < a.Len(); i++ {
			if a.IsValid(i) && a.Value(i) != a.Value(i) {
				return nil, nil, false
			}
		}
		lo, hi = extremes(a, func(i, j int) bool { return a.Value(i) < a.Value(j) })
	case *array.String:
		if n.kind != kString {
			return nil, nil, false
		}
		lo, hi = extremes(a, func(i, j int) bool { return a.Value(i) < a.Value(j) })
	case *array.Binary:
		if n.kind != kBinary {
			return nil, nil, false
		}
		lo, hi = extremes(a, func(i, j int) bool { return bytes.Compare(a.Value(i), a.Value(j)) < 0 })
	case *array.FixedSizeBinary:
		if n.kind != kFixed {
			return nil, nil, false
		}
		lo, hi = extremes(a, func(i, j int) bool { return bytes.Compare(a.Value(i), a.Value(j)) < 0 })
	default:
		return nil, nil, false
	}
	if lo < 0 {
		return nil, nil, false
	}
	return n.appendJSON(nil, arr, lo), n.appendJSON(nil, arr, hi), true
}

// extremes returns the indexes of the least and greatest valid values.
func extremes(arr arrow.Array, less func(i, j int) bool) (lo, hi int) {
	lo, hi = -1, -1
	for i := 0; i < arr.Len(); i++ {
		if arr.IsNull(i) {
			continue
		}
		if lo < 0 {
			lo, hi = i, i
			continue
		}
		if less(i, lo) {
			lo = i
		}
		if less(hi, i) {
			hi = i
		}
	}
	return lo, hi
}

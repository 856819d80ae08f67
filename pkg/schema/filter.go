package schema

import (
	"bytes"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/streamcast/streamcast/pkg/schema/jsontext"
)

// Filter is a compiled where= filter: column → value (equality) or column →
// list of values (membership), all terms ANDed. Safe for concurrent use
// (immutable). A nil *Filter matches everything.
//
// Matching is exact and typed. With a schema, each value must fit its
// column's type (refused at compile otherwise), integers compare as
// integers, floats numerically (0.0 matches -0.0), strings as text, binary as
// the bytes its text decodes to, and null matches a null (or omitted)
// nullable column. Without a schema (Any) any column name is accepted, a
// missing key counts as null, numbers compare by value (1 matches 1.0), and
// a value of another JSON type never matches (true is not 1).
type Filter struct {
	s     *Schema
	terms []term
	json  []byte
}

type term struct {
	name    string
	col     int   // top-level column; -1 without a schema
	n       *node // nil without a schema
	hasNull bool
	vals    []fvalue
	canon   [][]byte // canonical encodings of vals, in vals' order (for the echo)

	// Membership sets, built once at compile so a row costs one hash lookup
	// per term however long the list: a commit evaluates every subscriber's
	// filter under the fan-out lock, so a scan per row there would let one
	// subscriber's list slow the publisher and every other subscriber (I5).
	byCanon map[string]struct{} // canonical bytes of every value
	strs    map[string]struct{} // string and binary values (their bytes)
	ints    map[int64]struct{}
	floats  map[float64]struct{} // +0 and -0 are one key, as they are equal
	bools   [2]bool              // false, true
	zeroFlt bool                 // a float 0 is listed: "0.0" and "-0.0" both match
}

// fvalue is one non-null filter value (or a value read for comparison).
type fvalue struct {
	kind byte // 'b' boolean, 'i' integer, 'f' float, 's' string or binary bytes
	b    bool
	i    int64
	f    float64
	s    []byte
}

// FilterError is a where= filter that was refused. Column names the column
// it is about ("" for the filter as a whole).
type FilterError struct {
	Column  string
	Problem string
}

// Error words the refusal: where: column "name": problem.
func (e *FilterError) Error() string {
	if e.Column == "" {
		return "where: " + e.Problem
	}
	return "where: column " + strconv.Quote(e.Column) + ": " + e.Problem
}

var allFilter = []byte("{}")

// CompileFilter compiles a where= object against s. nil, empty input and {}
// give a filter that matches everything. Refused, naming the column: a
// column the schema does not declare, a struct, list or map column, a value
// that is not a scalar (or a list of scalars), an empty list, a value of the
// wrong type for its column ("abc" for an integer column, 1.5 for an integer
// column, bad base16), and null for a column that can never be null.
func (s *Schema) CompileFilter(where []byte) (*Filter, error) {
	f := &Filter{s: s}
	if len(bytes.TrimLeft(where, " \t\r\n")) == 0 {
		f.json = allFilter
		return f, nil
	}
	v, err := parseJSON(where)
	if err != nil {
		return nil, &FilterError{Problem: err.Error()}
	}
	if v.kind != 'o' {
		return nil, &FilterError{Problem: "a filter is a JSON object of column → value, got " + v.kindName()}
	}
	for _, m := range v.members {
		t := term{name: m.key, col: -1}
		if !s.any {
			col, ok := s.index[m.key]
			if !ok {
				return nil, &FilterError{Column: m.key, Problem: "this stream has no such column (declared: " + s.columnList() + ")"}
			}
			t.col, t.n = col, s.root.fields[col]
			if !t.n.kind.scalar() {
				return nil, &FilterError{Column: m.key, Problem: "is " + t.n.kind.article() + " column; where= compares scalar columns only"}
			}
		}
		items := []*jvalue{m.val}
		switch m.val.kind {
		case 'a':
			if len(m.val.items) == 0 {
				return nil, &FilterError{Column: m.key, Problem: "the value is an empty list, which matches nothing; give at least one value"}
			}
			items = m.val.items
		case 'o':
			return nil, &FilterError{Column: m.key, Problem: "the value is an object; a filter value is a scalar, or a list of scalars for membership"}
		}
		for _, it := range items {
			if it.kind == 'a' || it.kind == 'o' {
				return nil, &FilterError{Column: m.key, Problem: "the list holds " + it.kindName() + ", which is not a scalar; a membership list holds scalars"}
			}
			if it.kind == 'z' {
				if t.n != nil && !t.n.nullable {
					return nil, &FilterError{Column: m.key, Problem: "is never null (its type is " + t.n.typeText() + "), so null would match nothing"}
				}
				t.hasNull = true
				continue
			}
			fv, prob := filterValue(t.n, it)
			if prob != "" {
				return nil, &FilterError{Column: m.key, Problem: prob}
			}
			t.add(fv)
		}
		f.terms = append(f.terms, t)
	}
	if !s.any {
		sort.SliceStable(f.terms, func(i, j int) bool { return f.terms[i].col < f.terms[j].col })
	}
	f.json = f.appendJSON(nil)
	return f, nil
}

func (s *Schema) columnList() string {
	names := make([]string, len(s.root.fields))
	for i, f := range s.root.fields {
		names[i] = f.name
	}
	l := strings.Join(names, ", ")
	if len(l) > 200 {
		l = l[:197] + "..."
	}
	return l
}

func (k kind) article() string {
	switch k {
	case kStruct:
		return "a struct (object)"
	case kList:
		return "a list (array)"
	case kMap:
		return "a map (object)"
	}
	return "a scalar"
}

// add appends v unless the term already has it, in O(1): duplicates are
// found by hashing the canonical bytes, so a list of n values compiles in
// O(n) (a scan per value made a 60k-value list cost seconds of CPU).
func (t *term) add(v fvalue) {
	c := t.canonOf(v)
	if t.byCanon == nil {
		t.byCanon = map[string]struct{}{}
	}
	if _, dup := t.byCanon[string(c)]; dup {
		return
	}
	t.byCanon[string(c)] = struct{}{}
	t.vals = append(t.vals, v)
	t.canon = append(t.canon, c)
	switch v.kind {
	case 'b':
		if v.b {
			t.bools[1] = true
		} else {
			t.bools[0] = true
		}
	case 'i':
		if t.ints == nil {
			t.ints = map[int64]struct{}{}
		}
		t.ints[v.i] = struct{}{}
	case 'f':
		if t.floats == nil {
			t.floats = map[float64]struct{}{}
		}
		t.floats[v.f] = struct{}{}
		if v.f == 0 {
			t.zeroFlt = true
		}
	case 's':
		if t.strs == nil {
			t.strs = map[string]struct{}{}
		}
		t.strs[string(v.s)] = struct{}{}
	}
}

// hasBool, hasInt, hasFloat and hasBytes are the membership tests.
func (t *term) hasBool(b bool) bool {
	if b {
		return t.bools[1]
	}
	return t.bools[0]
}

func (t *term) hasInt(i int64) bool {
	_, ok := t.ints[i]
	return ok
}

func (t *term) hasFloat(f float64) bool {
	_, ok := t.floats[f]
	return ok
}

func (t *term) hasBytes(b []byte) bool {
	_, ok := t.strs[string(b)] // the conversion does not allocate in a map index
	return ok
}

// canonOf is the canonical JSON of v in t's column.
func (t *term) canonOf(v fvalue) []byte {
	switch v.kind {
	case 'b':
		if v.b {
			return []byte("true")
		}
		return []byte("false")
	case 'i':
		return strconv.AppendInt(nil, v.i, 10)
	case 'f':
		if t.n != nil && t.n.kind == kFloat32 {
			return jsontext.AppendFloat32(nil, float32(v.f))
		}
		return jsontext.AppendFloat64(nil, v.f)
	}
	if t.n != nil && (t.n.kind == kBinary || t.n.kind == kFixed) {
		return appendBinary(nil, v.s, t.n.enc)
	}
	return jsontext.AppendString(nil, v.s)
}

// filterValue converts a scalar filter value for column n (nil: no schema).
func filterValue(n *node, v *jvalue) (fvalue, string) {
	if n == nil {
		switch v.kind {
		case 'b':
			return fvalue{kind: 'b', b: v.str == "true"}, ""
		case 's':
			return fvalue{kind: 's', s: []byte(v.str)}, ""
		}
		if i, p := jsontext.ExactInt([]byte(v.str)); p == jsontext.IntOK {
			return fvalue{kind: 'i', i: i}, ""
		}
		f, err := strconv.ParseFloat(v.str, 64)
		if err != nil {
			return fvalue{}, v.str + " is not a finite number"
		}
		// A number whose float64 is an integer (1e-400 is 0) is that
		// integer, as 0.0 is: otherwise its echo (0.0) would compile to an
		// integer and filter differently from the filter it echoes.
		if i, ok := integralFloat(f); ok {
			return fvalue{kind: 'i', i: i}, ""
		}
		return fvalue{kind: 'f', f: f}, ""
	}
	wrong := func() (fvalue, string) {
		got := v.kindName()
		if v.kind == 's' {
			got += " " + strconv.Quote(v.str)
		} else if v.kind != 'z' {
			got += " " + v.str
		}
		return fvalue{}, "the column holds " + strings.TrimPrefix(strings.TrimPrefix(n.wants(), "a "), "an ") + " values, so " + got + " would match nothing"
	}
	switch n.kind {
	case kBool:
		if v.kind != 'b' {
			return wrong()
		}
		return fvalue{kind: 'b', b: v.str == "true"}, ""
	case kInt32, kInt64:
		if v.kind != 'n' {
			return wrong()
		}
		i, p := jsontext.ExactInt([]byte(v.str))
		switch {
		case p == jsontext.IntFraction:
			return fvalue{}, v.str + " is not an integer, so it would match nothing in an integer column"
		case p == jsontext.IntRange || (n.kind == kInt32 && (i < math.MinInt32 || i > math.MaxInt32)):
			return fvalue{}, v.str + " is out of range for the column's " + map[kind]string{kInt32: "int32", kInt64: "int64"}[n.kind]
		}
		return fvalue{kind: 'i', i: i}, ""
	case kFloat32, kFloat64:
		if v.kind != 'n' {
			return wrong()
		}
		bits := 64
		if n.kind == kFloat32 {
			bits = 32
		}
		f, err := strconv.ParseFloat(v.str, bits)
		if err != nil {
			return fvalue{}, v.str + " is out of range for the column's float" + strconv.Itoa(bits)
		}
		return fvalue{kind: 'f', f: f}, ""
	case kString:
		if v.kind != 's' {
			return wrong()
		}
		return fvalue{kind: 's', s: []byte(v.str)}, ""
	case kBinary, kFixed:
		if v.kind != 's' {
			return wrong()
		}
		b, prob := decodeBinaryText([]byte(v.str), n.enc)
		if prob != "" {
			return fvalue{}, strconv.Quote(v.str) + " is not valid " + n.enc.String() + ": " + prob
		}
		if n.kind == kFixed && len(b) != n.size {
			return fvalue{}, strconv.Quote(v.str) + " is " + strconv.Itoa(len(b)) + " bytes, but the column holds exactly " + strconv.Itoa(n.size)
		}
		return fvalue{kind: 's', s: b}, ""
	}
	return fvalue{}, "is not a scalar column"
}

// decodeBinaryText decodes base16 (either case) or strict padded base64.
func decodeBinaryText(text []byte, enc Encoding) ([]byte, string) {
	if enc == EncodingBase16 {
		if len(text)%2 != 0 {
			return nil, "an odd number of hex digits"
		}
		out := make([]byte, len(text)/2)
		for i := 0; i < len(text); i += 2 {
			h, ok1 := jsontext.Unhex(text[i])
			l, ok2 := jsontext.Unhex(text[i+1])
			if !ok1 || !ok2 {
				return nil, "not a hex digit near position " + strconv.Itoa(i)
			}
			out[i/2] = h<<4 | l
		}
		return out, ""
	}
	if bytes.ContainsAny(text, "\r\n") {
		return nil, "a line break"
	}
	out, err := b64.AppendDecode(nil, text)
	if err != nil {
		return nil, strings.TrimPrefix(err.Error(), "illegal base64 data ")
	}
	return out, ""
}

// All reports whether f restricts nothing (nil-safe).
func (f *Filter) All() bool { return f == nil || len(f.terms) == 0 }

// JSON returns the canonical echo of the filter, for the greeting: columns
// in schema order (as given, without a schema), values in their canonical
// form, a list kept a list with repeats dropped; "{}" when All.
func (f *Filter) JSON() []byte {
	if f.All() {
		return allFilter
	}
	return f.json
}

func (f *Filter) appendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	for k, t := range f.terms {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = jsontext.AppendString(dst, []byte(t.name))
		dst = append(dst, ':')
		n := len(t.vals)
		if t.hasNull {
			n++
		}
		list := n > 1
		if list {
			dst = append(dst, '[')
		}
		for i, v := range t.vals {
			if i > 0 {
				dst = append(dst, ',')
			}
			if t.n == nil && v.kind == 'f' {
				dst = jsontext.AppendFloat64(dst, v.f)
			} else {
				dst = append(dst, t.canon[i]...)
			}
		}
		if t.hasNull {
			if len(t.vals) > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, "null"...)
		}
		if list {
			dst = append(dst, ']')
		}
	}
	return append(dst, '}')
}

// matchCanon reports whether the canonical value v (of t's column) matches.
func (t *term) matchCanon(v []byte) bool {
	if string(v) == "null" {
		return t.hasNull
	}
	if len(t.canon) <= 4 {
		// A short list is cheaper to compare than to hash.
		for _, c := range t.canon {
			if string(c) == string(v) {
				return true
			}
		}
	} else if _, ok := t.byCanon[string(v)]; ok {
		return true
	}
	// 0.0 and -0.0 are equal numbers with two canonical forms.
	return t.zeroFlt && (string(v) == "0.0" || string(v) == "-0.0")
}

// MatchRow reports whether a row decoded by the filter's schema matches.
func (f *Filter) MatchRow(r *Row) bool {
	if f.All() {
		return true
	}
	if f.s.any || r.schema != f.s {
		return f.MatchCanonical(r.Canonical)
	}
	for i := range f.terms {
		t := &f.terms[i]
		sp := r.dec.spans[t.col]
		if !t.matchCanon(r.Canonical[sp.start:sp.end]) {
			return false
		}
	}
	return true
}

// MatchCanonical reports whether a canonical row (one read back from the
// buffer) matches. A row that is not canonical for the schema matches
// nothing.
func (f *Filter) MatchCanonical(canonical []byte) bool {
	if f.All() {
		return true
	}
	if f.s.any {
		return f.matchAny(canonical)
	}
	data := canonical
	if len(data) == 0 || data[0] != '{' {
		return false
	}
	pos := 1
	ti := 0
	last := f.terms[len(f.terms)-1].col
	for k, fl := range f.s.root.fields[:last+1] {
		if k > 0 {
			if pos >= len(data) || data[pos] != ',' {
				return false
			}
			pos++
		}
		if !bytes.HasPrefix(data[pos:], fl.key) {
			return false
		}
		pos += len(fl.key)
		end := skipCanonical(data, pos)
		if end < 0 {
			return false
		}
		for ti < len(f.terms) && f.terms[ti].col == k {
			if !f.terms[ti].matchCanon(data[pos:end]) {
				return false
			}
			ti++
		}
		pos = end
	}
	return true
}

// skipCanonical returns the end of the canonical value at pos, or -1.
func skipCanonical(data []byte, pos int) int {
	depth := 0
	for i := pos; i < len(data); i++ {
		switch data[i] {
		case '"':
			i++
			for i < len(data) && data[i] != '"' {
				if data[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(data) {
				return -1
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
	}
	if depth == 0 {
		return len(data)
	}
	return -1
}

// matchAny evaluates a filter without a schema against a JSON object.
func (f *Filter) matchAny(data []byte) bool {
	spans := make([]span, len(f.terms))
	for i := range spans {
		spans[i] = span{-1, -1}
	}
	pos := jsontext.SkipWS(data, 0)
	if pos >= len(data) || data[pos] != '{' {
		return false
	}
	pos = jsontext.SkipWS(data, pos+1)
	if pos < len(data) && data[pos] == '}' {
		pos++
	} else {
		for {
			if pos >= len(data) || data[pos] != '"' {
				return false
			}
			key, end, prob := jsontext.DecodeString(data, pos, nil)
			if prob != "" {
				return false
			}
			pos = jsontext.SkipWS(data, end)
			if pos >= len(data) || data[pos] != ':' {
				return false
			}
			pos = jsontext.SkipWS(data, pos+1)
			vend, p := jsontext.SkipValue(data, pos, 0)
			if p != "" {
				return false
			}
			for i := range f.terms {
				if f.terms[i].name == string(key) {
					spans[i] = span{pos, vend} // the last copy of a key wins
				}
			}
			pos = jsontext.SkipWS(data, vend)
			if pos < len(data) && data[pos] == ',' {
				pos = jsontext.SkipWS(data, pos+1)
				continue
			}
			if pos < len(data) && data[pos] == '}' {
				break
			}
			return false
		}
	}
	for i := range f.terms {
		t := &f.terms[i]
		if spans[i].start < 0 {
			if !t.hasNull {
				return false
			}
			continue
		}
		if !t.matchAnyValue(data[spans[i].start:spans[i].end]) {
			return false
		}
	}
	return true
}

// matchAnyValue compares one raw JSON value with a schema-less term.
func (t *term) matchAnyValue(v []byte) bool {
	switch c := v[0]; {
	case c == 'n':
		return t.hasNull
	case c == 't' || c == 'f':
		return t.hasBool(c == 't')
	case c == '"':
		s, _, prob := jsontext.DecodeString(v, 0, nil)
		return prob == "" && t.hasBytes(s)
	case c == '-' || jsontext.IsDigit(c):
		i, ip := jsontext.ExactInt(v)
		if ip == jsontext.IntOK {
			if t.hasInt(i) {
				return true
			}
			if len(t.floats) == 0 {
				return false
			}
		}
		fl, err := strconv.ParseFloat(jsontext.UnsafeString(v), 64)
		if err != nil {
			return false
		}
		// A value that is no integer as written but whose float64 is one
		// (1e-400) matches that integer, as the same filter value would.
		if fi, ok := integralFloat(fl); ok && ip != jsontext.IntOK && t.hasInt(fi) {
			return true
		}
		return t.hasFloat(fl)
	}
	return false
}

// integralFloat returns f as an int64 when it is an integer in int64's
// range (-0 is 0).
func integralFloat(f float64) (int64, bool) {
	if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// MatchArrow reports whether row i of cols (the declared columns in
// Columns() order) matches. Without a schema there are no columns, and only
// a filter that restricts nothing matches.
func (f *Filter) MatchArrow(cols []arrow.Array, i int) bool {
	if f.All() {
		return true
	}
	if f.s.any {
		return false
	}
	for k := range f.terms {
		t := &f.terms[k]
		if t.col >= len(cols) {
			return false
		}
		arr := cols[t.col]
		if arr.IsNull(i) {
			if !t.hasNull {
				return false
			}
			continue
		}
		if !t.matchArrow(arr, i) {
			return false
		}
	}
	return true
}

func (t *term) matchArrow(arr arrow.Array, i int) bool {
	switch a := arr.(type) {
	case *array.Boolean:
		return t.hasBool(a.Value(i))
	case *array.Int64:
		return t.hasInt(a.Value(i))
	case *array.Int32:
		return t.hasInt(int64(a.Value(i)))
	case *array.Float64:
		return t.hasFloat(a.Value(i))
	case *array.Float32:
		return t.hasFloat(float64(a.Value(i)))
	case *array.String:
		_, ok := t.strs[a.Value(i)]
		return ok
	case *array.Binary:
		return t.hasBytes(a.Value(i))
	case *array.FixedSizeBinary:
		return t.hasBytes(a.Value(i))
	}
	return false
}

// MayMatch reports whether a file whose columns have the given statistics
// may hold a matching row, for pruning: it is false only when some term's
// values all lie outside its column's [min, max]. minmax returns canonical
// JSON scalars as MinMax does; ok=false (no statistics), a term that
// matches null, and statistics that do not parse all count as "may match".
func (f *Filter) MayMatch(minmax func(column string) (min, max []byte, ok bool)) bool {
	if f.All() || f.s.any || minmax == nil {
		return true
	}
	for i := range f.terms {
		t := &f.terms[i]
		if t.hasNull {
			continue
		}
		lo, hi, ok := minmax(t.name)
		if !ok {
			continue
		}
		minv, ok1 := statValue(t.n, lo)
		maxv, ok2 := statValue(t.n, hi)
		if !ok1 || !ok2 {
			continue
		}
		inside := false
		for _, v := range t.vals {
			if compareValues(minv, v) <= 0 && compareValues(v, maxv) <= 0 {
				inside = true
				break
			}
		}
		if !inside {
			return false
		}
	}
	return true
}

// statValue reads a canonical scalar of column n.
func statValue(n *node, text []byte) (fvalue, bool) {
	v, err := parseJSON(text)
	if err != nil || v.kind == 'a' || v.kind == 'o' || v.kind == 'z' {
		return fvalue{}, false
	}
	fv, prob := filterValue(n, v)
	if prob != "" {
		return fvalue{}, false
	}
	if fv.kind == 'f' && math.IsNaN(fv.f) {
		return fvalue{}, false
	}
	return fv, true
}

// compareValues orders two values of the same column.
func compareValues(a, b fvalue) int {
	switch a.kind {
	case 'b':
		switch {
		case a.b == b.b:
			return 0
		case !a.b:
			return -1
		}
		return 1
	case 'i':
		switch {
		case a.i < b.i:
			return -1
		case a.i > b.i:
			return 1
		}
		return 0
	case 'f':
		switch {
		case a.f < b.f:
			return -1
		case a.f > b.f:
			return 1
		}
		return 0
	}
	return bytes.Compare(a.s, b.s)
}

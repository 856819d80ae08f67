package schema

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

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
//
// A filter holds each value once, as its canonical text in the echo (json),
// which the greeting needs anyway; a term's membership set is a table of
// offsets into that text. A subscriber may send tens of thousands of values
// and a server holds many subscribers, so what a filter retains is bounded
// by its size: Size reports it, and it is the echo plus about 3.2 bytes
// per distinct value (see term.idx). For strings of about ten bytes that
// is about 1.27 times the filter's JSON; for the shortest values (one-digit
// numbers, two bytes of JSON each) about 2.6 times. The echo itself is no
// longer than the JSON but where the canonical form of a number is longer
// than its text (1e18 echoes as 19 digits, 1 in a float column as 1.0):
// never more than eight times the JSON in all (FuzzCompileFilterMemory).
type Filter struct {
	s     *Schema
	terms []term
	json  []byte // the canonical echo; every value's text lies in it once
	seed  maphash.Seed
}

type term struct {
	name    string
	col     int   // top-level column; -1 without a schema
	n       *node // nil without a schema
	hasNull bool
	bools   [2]bool // false, true
	zeroFlt bool    // a float 0 is listed: "0.0" and "-0.0" both match
	floats  bool    // a non-integral number is listed (schema-less terms)
	escaped bool    // some string value's canonical text holds an escape (\)
	nvals   int     // distinct non-null values
	first   int     // offset in json of the first value; a list when json[first-1] is '['

	// idx is the membership set, built once at compile so a row costs one
	// hash and a look at two buckets per term however long the list: a
	// commit evaluates every subscriber's filter under the fan-out lock,
	// so a scan per row there would let one subscriber's list slow the
	// publisher and every other subscriber (I5).
	//
	// It is a cuckoo table of buckets of bucketSlots slots, each value in
	// one of the two buckets its hash chooses (see choices), 19/20 full.
	// idx holds each slot's fingerprint, a byte of the hash (0: empty),
	// bucket by bucket, then each slot's value's offset from first, in
	// two bytes, or four when wide (a term whose values span 64 KiB or
	// more). A probe reads the two buckets' fingerprints, eight bytes
	// each and independent of each other, so a table read from memory
	// costs about one wait, and reads the echo only where a fingerprint
	// agrees. What a value costs is its offset and fingerprint, and a
	// twentieth of them empty: a compiled filter is held as long as its
	// subscriber, and 64 KiB filters held 1.5 times their size while a
	// table was a third empty and its slots four bytes.
	//
	// A value's key is its canonical text, without the quotes for a
	// string: so a row's canonical value is its own key, and a string
	// from an Arrow array is its own key, with no copy, unless the term
	// holds an escaped string (see hasString).
	idx     []byte
	buckets int  // in idx
	wide    bool // offsets in idx are four bytes
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
//
// Compiling allocates a small multiple of len(where), whatever its shape:
// the text is checked without building a tree, then read once more into
// the echo.
func (s *Schema) CompileFilter(where []byte) (*Filter, error) {
	f := &Filter{s: s}
	if len(bytes.TrimLeft(where, " \t\r\n")) == 0 {
		f.json = allFilter
		return f, nil
	}
	if err := checkJSON(where); err != nil {
		return nil, &FilterError{Problem: err.Error()}
	}
	pos := jsontext.SkipWS(where, 0)
	if where[pos] != '{' {
		return nil, &FilterError{Problem: "a filter is a JSON object of column → value, got " + (&jvalue{kind: kindAt(where, pos)}).kindName()}
	}
	c := filterCompiler{s: s, data: where, seed: maphash.MakeSeed()}
	c.takeDedup()
	defer c.giveDedup()
	if err := c.members(pos); err != nil {
		return nil, err
	}
	if len(c.terms) == 0 {
		f.json = allFilter
		return f, nil
	}
	f.seed = c.seed
	var ends []int
	f.terms, f.json, ends = c.assemble()
	if len(f.json) >= 1<<31 {
		return nil, &FilterError{Problem: "the filter's canonical form is " + strconv.Itoa(len(f.json)) + " bytes, over the 2 GiB a filter may hold; send a shorter one"}
	}
	for i := range f.terms {
		f.index(&f.terms[i], ends[i])
	}
	return f, nil
}

// kindAt is the parser's kind letter of the (valid) JSON value at pos.
func kindAt(data []byte, pos int) byte {
	switch data[pos] {
	case '{':
		return 'o'
	case '[':
		return 'a'
	case '"':
		return 's'
	case 't', 'f':
		return 'b'
	case 'n':
		return 'z'
	}
	return 'n'
}

// filterCompiler reads a checked where= text into terms and their
// canonical segments ("name":value or "name":[values]) in buf, which
// holds '{', then the segments in the order given, separated by ','.
type filterCompiler struct {
	s        *Schema
	data     []byte
	seed     maphash.Seed
	terms    []term
	segs     [][2]int // each term's segment in buf
	buf      []byte
	scratch  []byte    // a decoded string
	bin      []byte    // a decoded binary value
	dedup    []uint32  // open-addressing set of offsets in buf of the current term's values
	dedupBox *[]uint32 // what dedup came from dedupTables in, to go back in
}

// dedupTables holds the duplicate sets of finished compiles for the next
// ones. A 64 KiB list needs a 64 KiB set for the length of its compile
// only, and a burst of subscribers with large distinct filters would
// otherwise leave one per subscriber for the collector. Sets over
// maxPooledDedup slots are left to the collector, so a rare huge filter's
// is not kept.
var dedupTables sync.Pool // of *[]uint32

const maxPooledDedup = 1 << 18

// takeDedup gives c a duplicate set left by an earlier compile, if any.
func (c *filterCompiler) takeDedup() {
	if p, ok := dedupTables.Get().(*[]uint32); ok {
		c.dedupBox, c.dedup = p, *p
	}
}

// giveDedup returns c's duplicate set for a later compile.
func (c *filterCompiler) giveDedup() {
	if cap(c.dedup) == 0 || cap(c.dedup) > maxPooledDedup {
		return
	}
	if c.dedupBox == nil {
		c.dedupBox = new([]uint32)
	}
	*c.dedupBox = c.dedup[:0]
	dedupTables.Put(c.dedupBox)
	c.dedup, c.dedupBox = nil, nil
}

// members compiles the members of the object at pos, in their order, so
// the first refusal is the first bad member's.
func (c *filterCompiler) members(pos int) error {
	data := c.data
	c.buf = make([]byte, 0, len(data)+8)
	c.buf = append(c.buf, '{')
	pos = jsontext.SkipWS(data, pos+1)
	if data[pos] == '}' {
		return nil
	}
	for {
		key, end, prob := jsontext.DecodeString(data, pos, c.scratch[:0])
		if prob != "" { // checkJSON let it through: never seen
			return &FilterError{Problem: prob}
		}
		c.scratch = key
		t := term{name: string(key), col: -1}
		pos = jsontext.SkipWS(data, jsontext.SkipWS(data, end)+1) // past ':'
		var err error
		if pos, err = c.member(&t, pos); err != nil {
			return err
		}
		pos = jsontext.SkipWS(data, pos)
		if data[pos] != ',' {
			return nil // '}': the text was checked
		}
		pos = jsontext.SkipWS(data, pos+1)
	}
}

// member compiles one column's value (at pos) into t and its segment, and
// returns the end of the value.
func (c *filterCompiler) member(t *term, pos int) (int, error) {
	s, data := c.s, c.data
	if !s.any {
		col, ok := s.index[t.name]
		if !ok {
			return 0, &FilterError{Column: t.name, Problem: "this stream has no such column (declared: " + s.columnList() + ")"}
		}
		t.col, t.n = col, s.root.fields[col]
		if !t.n.kind.scalar() {
			return 0, &FilterError{Column: t.name, Problem: "is " + t.n.kind.article() + " column; where= compares scalar columns only"}
		}
	}
	list := data[pos] == '['
	items := 1
	switch data[pos] {
	case '[':
		if data[jsontext.SkipWS(data, pos+1)] == ']' {
			return 0, &FilterError{Column: t.name, Problem: "the value is an empty list, which matches nothing; give at least one value"}
		}
		items = countItems(data, pos)
	case '{':
		return 0, &FilterError{Column: t.name, Problem: "the value is an object; a filter value is a scalar, or a list of scalars for membership"}
	}
	if len(c.terms) > 0 {
		c.buf = append(c.buf, ',')
	}
	segStart := len(c.buf)
	c.buf = jsontext.AppendString(c.buf, []byte(t.name))
	c.buf = append(c.buf, ':')
	bracket := len(c.buf)
	c.buf = append(c.buf, '[')
	c.resetDedup(items)
	if list {
		pos = jsontext.SkipWS(data, pos+1)
	}
	for {
		var err error
		if pos, err = c.item(t, pos); err != nil {
			return 0, err
		}
		if !list {
			break
		}
		pos = jsontext.SkipWS(data, pos)
		if data[pos] == ']' {
			pos++
			break
		}
		pos = jsontext.SkipWS(data, pos+1) // past ','
	}
	if t.nvals+b2i(t.hasNull) > 1 {
		if t.hasNull {
			c.buf = append(c.buf, ",null"[b2i(t.nvals == 0):]...)
		}
		c.buf = append(c.buf, ']')
	} else {
		// One value: no list in the echo.
		c.buf = append(c.buf[:bracket], c.buf[bracket+1:]...)
		if t.hasNull {
			c.buf = append(c.buf, "null"...)
		}
	}
	c.terms = append(c.terms, *t)
	c.segs = append(c.segs, [2]int{segStart, len(c.buf)})
	return pos, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// countItems counts the items of the (checked) array at pos, to size the
// term's sets before they are filled.
func countItems(data []byte, pos int) int {
	n := 0
	pos = jsontext.SkipWS(data, pos+1)
	for pos < len(data) && data[pos] != ']' {
		end, prob := jsontext.SkipValue(data, pos, 1)
		if prob != "" {
			return n + 1
		}
		n++
		pos = jsontext.SkipWS(data, end)
		if pos < len(data) && data[pos] == ',' {
			pos = jsontext.SkipWS(data, pos+1)
		}
	}
	return n
}

// item compiles the scalar at pos into t and returns its end.
func (c *filterCompiler) item(t *term, pos int) (int, error) {
	data := c.data
	k := kindAt(data, pos)
	var text []byte
	end := pos
	switch k {
	case 'a', 'o':
		return 0, &FilterError{Column: t.name, Problem: "the list holds " + (&jvalue{kind: k}).kindName() + ", which is not a scalar; a membership list holds scalars"}
	case 'z':
		if t.n != nil && !t.n.nullable {
			return 0, &FilterError{Column: t.name, Problem: "is never null (its type is " + t.n.typeText() + "), so null would match nothing"}
		}
		t.hasNull = true
		return pos + 4, nil
	case 's':
		var prob string
		text, end, prob = jsontext.DecodeString(data, pos, c.scratch[:0])
		if prob != "" {
			return 0, &FilterError{Column: t.name, Problem: prob}
		}
		c.scratch = text
	case 'b':
		end = pos + 4
		if data[pos] == 'f' {
			end++
		}
		text = data[pos:end]
	default:
		end, _, _ = jsontext.ScanNumber(data, pos)
		text = data[pos:end]
	}
	fv, prob := filterValue(t.n, k, text, c.bin[:0])
	if prob != "" {
		return 0, &FilterError{Column: t.name, Problem: prob}
	}
	if fv.kind == 's' && t.n != nil && t.n.kind != kString {
		c.bin = fv.s
	}
	c.add(t, fv)
	return end, nil
}

// resetDedup empties the duplicate set and sizes it for n values (load at
// most 1/2).
func (c *filterCompiler) resetDedup(n int) {
	size := 2
	for size < 2*n {
		size <<= 1
	}
	if cap(c.dedup) < size {
		c.dedup = make([]uint32, size)
		return
	}
	c.dedup = c.dedup[:size]
	clear(c.dedup)
}

// add appends v's canonical text to t's segment unless t already has it,
// in O(1): duplicates are found by hashing the canonical bytes, so a list
// of n values compiles in O(n) (a scan per value made a 60k-value list
// cost seconds of CPU).
func (c *filterCompiler) add(t *term, v fvalue) {
	start := len(c.buf)
	if t.nvals > 0 {
		c.buf = append(c.buf, ',')
	}
	at := len(c.buf)
	c.buf = t.appendCanon(c.buf, v)
	text := c.buf[at:]
	mask := uint64(len(c.dedup) - 1)
	for i := maphash.Bytes(c.seed, text) & mask; ; i = (i + 1) & mask {
		off := c.dedup[i]
		if off == 0 {
			c.dedup[i] = uint32(at)
			break
		}
		// Every value already in buf is followed by the ',' before
		// this one.
		if e := int(off) + len(text); e < at && string(c.buf[off:e]) == string(text) && c.buf[e] == ',' {
			c.buf = c.buf[:start]
			return
		}
	}
	t.nvals++
	if text[0] == '"' && bytes.IndexByte(text, '\\') >= 0 {
		t.escaped = true
	}
	switch v.kind {
	case 'b':
		t.bools[b2i(v.b)] = true
	case 'f':
		t.floats = true
		if v.f == 0 {
			t.zeroFlt = true
		}
	}
}

// assemble orders the terms (by column, with a schema) and joins their
// segments into the echo, with each term's first set, and returns where
// each term's segment ends in the echo. When the terms came
// in order, buf already is the echo but for its '}', and it is kept
// unless it has room to spare beyond a ninth of its length: a filter
// retains its echo, and copying it would leave buf, the size of the
// filter, for the collector.
func (c *filterCompiler) assemble() ([]term, []byte, []int) {
	order := make([]int, len(c.terms))
	for i := range order {
		order[i] = i
	}
	if !c.s.any {
		sort.SliceStable(order, func(i, j int) bool { return c.terms[order[i]].col < c.terms[order[j]].col })
	}
	inOrder := true
	for k, i := range order {
		inOrder = inOrder && k == i
	}
	var json []byte
	var base, ends []int // each term's segment in json, in order's order
	if inOrder {
		json = append(c.buf, '}')
		if cap(json)-len(json) > len(json)/8+64 {
			json = append(make([]byte, 0, len(json)), json...)
		}
		for _, sg := range c.segs {
			base = append(base, sg[0])
			ends = append(ends, sg[1])
		}
	} else {
		size := 1
		for _, sg := range c.segs {
			size += sg[1] - sg[0] + 1
		}
		json = make([]byte, 0, size)
		json = append(json, '{')
		for k, i := range order {
			if k > 0 {
				json = append(json, ',')
			}
			base = append(base, len(json))
			json = append(json, c.buf[c.segs[i][0]:c.segs[i][1]]...)
			ends = append(ends, len(json))
		}
		json = append(json, '}')
	}
	terms := make([]term, len(c.terms))
	for k, i := range order {
		t := c.terms[i]
		// The values start after "name": and, for a list, its '['.
		_, end, _ := jsontext.DecodeString(json, base[k], c.scratch[:0])
		t.first = end + 1
		if json[t.first] == '[' {
			t.first++
		}
		terms[k] = t
	}
	return terms, json, ends
}

// bucketSlots is the slots of a bucket of a term's table: a probe
// compares the fingerprints of two buckets, eight bytes each.
const bucketSlots = 8

// The table is built for loadPer20/20 of its slots full: at 19/20, a
// cuckoo table of two choices among buckets of eight almost always
// places every value in a few moves, and the empty slots cost 0.16 bytes
// a value.
const loadPer20 = 19

// maxMoves bounds the values one insertion may move before the table is
// built again, larger.
const maxMoves = 500

// index builds t's membership table (term.idx) from its values in f.json,
// which end at end (has compares a single value directly).
func (f *Filter) index(t *term, end int) {
	if t.nvals <= 1 {
		return
	}
	t.wide = end-t.first > math.MaxUint16
	per := bucketSlots * loadPer20
	for nb := (20*t.nvals + per - 1) / per; !f.build(t, nb); nb += nb/16 + 1 {
	}
}

// build places t's values in a table of nb buckets, by cuckoo hashing: a
// value goes in a free slot of either of its buckets, or takes one from
// a value that moves to its other bucket, and so on. It reports false
// when a value found no slot in maxMoves moves.
func (f *Filter) build(t *term, nb int) bool {
	w := 2
	if t.wide {
		w = 4
	}
	t.buckets = nb
	t.idx = make([]byte, nb*bucketSlots*(1+w))
	placed := true
	t.eachKey(f, func(off int, h uint64) bool {
		placed = f.insert(t, off-t.first, h)
		return placed
	})
	return placed
}

// insert places the value at rel (from t.first), whose key has hash h.
func (f *Filter) insert(t *term, rel int, h uint64) bool {
	rng := h | 1
	for range maxMoves {
		b1, b2 := t.choices(h)
		for _, b := range [2]int{b1, b2} {
			for s := b * bucketSlots; s < (b+1)*bucketSlots; s++ {
				if t.idx[s] == 0 {
					t.idx[s] = fingerprint(h)
					t.setOffset(s, rel)
					return true
				}
			}
		}
		// Both full: take a slot of either, chosen at random so that
		// two values cannot move each other back and forth for ever.
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		b := b1
		if rng&bucketSlots != 0 {
			b = b2
		}
		s := b*bucketSlots + int(rng%bucketSlots)
		moved := t.offset(s)
		t.idx[s] = fingerprint(h)
		t.setOffset(s, rel)
		p := t.first + moved
		k, _ := valueKey(f.json[p:skipCanonical(f.json, p)])
		rel, h = moved, maphash.Bytes(f.seed, k)
	}
	return false
}

// eachKey calls fn with the offset of each of t's non-null values in
// f.json and the hash of its key, until fn returns false.
func (t *term) eachKey(f *Filter, fn func(off int, h uint64) bool) {
	t.each(f.json, func(off int, v []byte) bool {
		if string(v) == "null" {
			return true
		}
		k, _ := valueKey(v)
		return fn(off, maphash.Bytes(f.seed, k))
	})
}

// choices are the two buckets of t's table a key of hash h may be in.
// Each is chosen by the high bits of one half of h, and the fingerprint
// is h's lowest byte, which neither uses.
func (t *term) choices(h uint64) (int, int) {
	nb := uint64(t.buckets)
	return int(uint64(uint32(h)) * nb >> 32), int(h >> 32 * nb >> 32)
}

// fingerprint is the byte of hash h a slot holds; 0 marks an empty slot.
func fingerprint(h uint64) byte {
	return max(byte(h), 1)
}

// offset returns the offset (from first) of the value in slot s of t's
// table.
func (t *term) offset(s int) int {
	at := t.buckets*bucketSlots + s*2
	if t.wide {
		return int(binary.LittleEndian.Uint32(t.idx[at+s*2:]))
	}
	return int(binary.LittleEndian.Uint16(t.idx[at:]))
}

// setOffset sets the offset in slot s of t's table to rel, which fits it.
func (t *term) setOffset(s, rel int) {
	at := t.buckets*bucketSlots + s*2
	if t.wide {
		binary.LittleEndian.PutUint32(t.idx[at+s*2:], uint32(rel))
		return
	}
	binary.LittleEndian.PutUint16(t.idx[at:], uint16(rel))
}

// each calls fn with the offset and canonical text of each of t's values
// in json (null last, when listed) until fn returns false.
func (t *term) each(json []byte, fn func(off int, v []byte) bool) {
	list := json[t.first-1] == '['
	for p := t.first; ; {
		end := skipCanonical(json, p)
		if end < 0 || !fn(p, json[p:end]) || !list || json[end] != ',' {
			return
		}
		p = end + 1
	}
}

// valueKey is the key of the canonical value v in a term's table: its
// text, without the quotes for a string (quoted reports that it was one).
func valueKey(v []byte) (k []byte, quoted bool) {
	if v[0] == '"' {
		return v[1 : len(v)-1], true
	}
	return v, false
}

// has reports whether canonical text v is one of t's values.
func (f *Filter) has(t *term, v []byte) bool {
	if t.nvals == 1 {
		// One value (an equality) is cheaper to compare than to hash.
		return f.at(t.first, v)
	}
	k, quoted := valueKey(v)
	return f.hasKey(t, k, quoted)
}

// hasKey reports whether the value with key k (a string's when quoted) is
// one of t's values.
func (f *Filter) hasKey(t *term, k []byte, quoted bool) bool {
	if t.nvals == 1 {
		return f.atKey(t.first, k, quoted)
	}
	if t.idx == nil {
		return false // null only
	}
	h := maphash.Bytes(f.seed, k)
	b1, b2 := t.choices(h)
	fp := uint64(fingerprint(h)) * lowBytes
	return f.inBucket(t, b1, fp, k, quoted) || (b2 != b1 && f.inBucket(t, b2, fp, k, quoted))
}

// inBucket reports whether bucket b of t's table holds the key k (a
// string's when quoted), whose fingerprint is in each byte of fp.
func (f *Filter) inBucket(t *term, b int, fp uint64, k []byte, quoted bool) bool {
	// A byte of x is 0 where a slot's fingerprint agrees, and m has the
	// top bit of each such byte: exactly those, as no carry crosses a
	// byte.
	x := binary.LittleEndian.Uint64(t.idx[b*bucketSlots:]) ^ fp
	m := ^((x&sevenBits + sevenBits) | x | sevenBits)
	for ; m != 0; m &= m - 1 {
		s := b*bucketSlots + bits.TrailingZeros64(m)/8
		if f.atKey(t.first+t.offset(s), k, quoted) {
			return true
		}
	}
	return false
}

const (
	lowBytes  uint64 = 0x0101010101010101
	sevenBits uint64 = 0x7f7f7f7f7f7f7f7f
)

// at reports whether the value in the echo at off is the canonical text
// v: a value there ends at ',', ']' or '}', and no canonical scalar is a
// prefix of another that ends there.
func (f *Filter) at(off int, v []byte) bool {
	e := off + len(v)
	if e >= len(f.json) || string(f.json[off:e]) != string(v) {
		return false
	}
	c := f.json[e]
	return c == ',' || c == ']' || c == '}'
}

// atKey reports whether the value in the echo at off has key k (a
// string's when quoted), as at does for its canonical text. A string's
// closing quote is found where k ends because k is a canonical string's
// inside (whose escapes are whole, so a '"' after it closes the string)
// or holds no escape (when the term's strings hold none either, so their
// insides have no quote).
func (f *Filter) atKey(off int, k []byte, quoted bool) bool {
	if quoted {
		if off >= len(f.json) || f.json[off] != '"' {
			return false
		}
		off++
	}
	e := off + len(k)
	if e >= len(f.json) || string(f.json[off:e]) != string(k) {
		return false
	}
	if quoted {
		if f.json[e] != '"' {
			return false
		}
		if e++; e >= len(f.json) {
			return false
		}
	}
	c := f.json[e]
	return c == ',' || c == ']' || c == '}'
}

// Size reports the bytes f holds beyond its schema: the echo, the terms and
// their tables, as allocated, before the allocator rounds each block up
// (by under a tenth for a large filter); nil-safe. A server bounds the
// memory its subscribers' filters take by it.
func (f *Filter) Size() int {
	if f == nil {
		return 0
	}
	n := int(unsafe.Sizeof(*f)) + cap(f.terms)*int(unsafe.Sizeof(term{}))
	if len(f.terms) > 0 {
		n += cap(f.json)
	}
	for i := range f.terms {
		n += len(f.terms[i].name) + cap(f.terms[i].idx)
	}
	return n
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

// appendCanon appends the canonical JSON of v in t's column.
func (t *term) appendCanon(dst []byte, v fvalue) []byte {
	switch v.kind {
	case 'b':
		if v.b {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case 'i':
		return strconv.AppendInt(dst, v.i, 10)
	case 'f':
		if t.n != nil && t.n.kind == kFloat32 {
			return jsontext.AppendFloat32(dst, float32(v.f))
		}
		return jsontext.AppendFloat64(dst, v.f)
	}
	if t.n != nil && (t.n.kind == kBinary || t.n.kind == kFixed) {
		return appendBinary(dst, v.s, t.n.enc)
	}
	return jsontext.AppendString(dst, v.s)
}

// filterValue converts a scalar filter value for column n (nil: no
// schema): k is its parser kind letter and text the string's decoded text,
// a number's token or "true"/"false". A string's value aliases text; a
// binary value is decoded into bin's memory.
func filterValue(n *node, k byte, text, bin []byte) (fvalue, string) {
	if n == nil {
		switch k {
		case 'b':
			return fvalue{kind: 'b', b: text[0] == 't'}, ""
		case 's':
			return fvalue{kind: 's', s: text}, ""
		}
		if i, p := jsontext.ExactInt(text); p == jsontext.IntOK {
			return fvalue{kind: 'i', i: i}, ""
		}
		f, err := strconv.ParseFloat(jsontext.UnsafeString(text), 64)
		if err != nil {
			return fvalue{}, string(text) + " is not a finite number"
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
		v := jvalue{kind: k}
		got := v.kindName()
		if k == 's' {
			got += " " + strconv.Quote(string(text))
		} else if k != 'z' {
			got += " " + string(text)
		}
		return fvalue{}, "the column holds " + strings.TrimPrefix(strings.TrimPrefix(n.wants(), "a "), "an ") + " values, so " + got + " would match nothing"
	}
	switch n.kind {
	case kBool:
		if k != 'b' {
			return wrong()
		}
		return fvalue{kind: 'b', b: text[0] == 't'}, ""
	case kInt32, kInt64:
		if k != 'n' {
			return wrong()
		}
		i, p := jsontext.ExactInt(text)
		switch {
		case p == jsontext.IntFraction:
			return fvalue{}, string(text) + " is not an integer, so it would match nothing in an integer column"
		case p == jsontext.IntRange || (n.kind == kInt32 && (i < math.MinInt32 || i > math.MaxInt32)):
			return fvalue{}, string(text) + " is out of range for the column's " + map[kind]string{kInt32: "int32", kInt64: "int64"}[n.kind]
		}
		return fvalue{kind: 'i', i: i}, ""
	case kFloat32, kFloat64:
		if k != 'n' {
			return wrong()
		}
		bits := 64
		if n.kind == kFloat32 {
			bits = 32
		}
		f, err := strconv.ParseFloat(jsontext.UnsafeString(text), bits)
		if err != nil {
			return fvalue{}, string(text) + " is out of range for the column's float" + strconv.Itoa(bits)
		}
		return fvalue{kind: 'f', f: f}, ""
	case kString:
		if k != 's' {
			return wrong()
		}
		return fvalue{kind: 's', s: text}, ""
	case kBinary, kFixed:
		if k != 's' {
			return wrong()
		}
		b, prob := decodeBinaryText(bin, text, n.enc)
		if prob != "" {
			return fvalue{}, strconv.Quote(string(text)) + " is not valid " + n.enc.String() + ": " + prob
		}
		if n.kind == kFixed && len(b) != n.size {
			return fvalue{}, strconv.Quote(string(text)) + " is " + strconv.Itoa(len(b)) + " bytes, but the column holds exactly " + strconv.Itoa(n.size)
		}
		return fvalue{kind: 's', s: b}, ""
	}
	return fvalue{}, "is not a scalar column"
}

// decodeBinaryText appends to dst the bytes of base16 (either case) or
// strict padded base64 text.
func decodeBinaryText(dst, text []byte, enc Encoding) ([]byte, string) {
	if enc == EncodingBase16 {
		if len(text)%2 != 0 {
			return nil, "an odd number of hex digits"
		}
		out := dst
		for i := 0; i < len(text); i += 2 {
			h, ok1 := jsontext.Unhex(text[i])
			l, ok2 := jsontext.Unhex(text[i+1])
			if !ok1 || !ok2 {
				return nil, "not a hex digit near position " + strconv.Itoa(i)
			}
			out = append(out, h<<4|l)
		}
		return out, ""
	}
	if bytes.ContainsAny(text, "\r\n") {
		return nil, "a line break"
	}
	out, err := b64.AppendDecode(dst, text)
	if err != nil {
		return nil, strings.TrimPrefix(err.Error(), "illegal base64 data ")
	}
	return out, ""
}

// All reports whether f restricts nothing (nil-safe).
func (f *Filter) All() bool { return f == nil || len(f.terms) == 0 }

// JSON returns the canonical echo of the filter, for the greeting: columns
// in schema order (as given, without a schema), values in their canonical
// form, a list kept a list with repeats dropped; "{}" when All. The bytes
// are f's own: callers must not change them.
func (f *Filter) JSON() []byte {
	if f.All() {
		return allFilter
	}
	return f.json
}

// matchCanon reports whether the canonical value v (of t's column) matches.
func (f *Filter) matchCanon(t *term, v []byte) bool {
	if string(v) == "null" {
		return t.hasNull
	}
	if f.has(t, v) {
		return true
	}
	// 0.0 and -0.0 are equal numbers with two canonical forms.
	return t.zeroFlt && (string(v) == "0.0" || string(v) == "-0.0")
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
			if !f.matchCanon(&f.terms[ti], data[pos:end]) {
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
		if !f.matchAnyValue(t, data[spans[i].start:spans[i].end]) {
			return false
		}
	}
	return true
}

// matchAnyValue compares one raw JSON value with a schema-less term.
func (f *Filter) matchAnyValue(t *term, v []byte) bool {
	var buf [64]byte
	switch c := v[0]; {
	case c == 'n':
		return t.hasNull
	case c == 't' || c == 'f':
		return t.bools[b2i(c == 't')]
	case c == '"':
		s, _, prob := jsontext.DecodeString(v, 0, buf[:0])
		if prob != "" {
			return false
		}
		if len(s) == len(v)-2 {
			// No escapes: valid UTF-8 without a control character or a
			// quote is its own canonical text.
			return f.has(t, v)
		}
		var canon [96]byte
		return f.has(t, jsontext.AppendString(canon[:0], s))
	case c == '-' || jsontext.IsDigit(c):
		i, ip := jsontext.ExactInt(v)
		if ip == jsontext.IntOK {
			if f.has(t, strconv.AppendInt(buf[:0], i, 10)) {
				return true
			}
			if !t.floats {
				return false
			}
		}
		fl, err := strconv.ParseFloat(jsontext.UnsafeString(v), 64)
		if err != nil {
			return false
		}
		// A value that is no integer as written but whose float64 is one
		// (1e-400) matches that integer, as the same filter value would.
		if fi, ok := integralFloat(fl); ok && ip != jsontext.IntOK && f.has(t, strconv.AppendInt(buf[:0], fi, 10)) {
			return true
		}
		return t.floats && f.has(t, jsontext.AppendFloat64(buf[:0], fl))
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
		if !f.matchArrow(t, arr, i) {
			return false
		}
	}
	return true
}

// matchArrow compares row i of arr with t by the value's canonical text,
// the key t's table is built on.
func (f *Filter) matchArrow(t *term, arr arrow.Array, i int) bool {
	var buf [96]byte
	switch a := arr.(type) {
	case *array.Boolean:
		return t.bools[b2i(a.Value(i))]
	case *array.Int64:
		return f.has(t, strconv.AppendInt(buf[:0], a.Value(i), 10))
	case *array.Int32:
		return f.has(t, strconv.AppendInt(buf[:0], int64(a.Value(i)), 10))
	case *array.Float64:
		return f.hasFloat(t, a.Value(i), 64)
	case *array.Float32:
		return f.hasFloat(t, float64(a.Value(i)), 32)
	case *array.String:
		return f.hasString(t, a.Value(i), buf[:0])
	case *array.Binary:
		return f.hasBinary(t, a.Value(i))
	case *array.FixedSizeBinary:
		return f.hasBinary(t, a.Value(i))
	}
	return false
}

// hasString reports whether the text v is one of t's (string) values.
// When none of them holds an escape, v is its own key: a v that needs an
// escape (or holds invalid UTF-8, which its canonical text would replace)
// cannot equal any of them, as its canonical text would not, and replay
// pays no scan or copy of v. Otherwise v's canonical text is built in buf.
func (f *Filter) hasString(t *term, v string, buf []byte) bool {
	if !t.escaped {
		return f.hasKey(t, jsontext.UnsafeBytes(v), true)
	}
	plain := true
	for i := 0; i < len(v) && plain; i++ {
		plain = v[i] >= 0x20 && v[i] < utf8.RuneSelf && v[i] != '"' && v[i] != '\\'
	}
	if plain {
		return f.hasKey(t, jsontext.UnsafeBytes(v), true)
	}
	// Filter strings are valid UTF-8; the canonical text would replace
	// invalid bytes and could then match one.
	return utf8.ValidString(v) && f.has(t, jsontext.AppendString(buf, jsontext.UnsafeBytes(v)))
}

// hasFloat reports whether the float v of a column of the given bits is
// one of t's values: 0 and -0 are equal, and NaN and infinities are never
// listed.
func (f *Filter) hasFloat(t *term, v float64, bits int) bool {
	if v == 0 {
		return t.zeroFlt
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	var buf [32]byte
	if bits == 32 {
		return f.has(t, jsontext.AppendFloat32(buf[:0], float32(v)))
	}
	return f.has(t, jsontext.AppendFloat64(buf[:0], v))
}

// hasBinary reports whether the bytes b are one of t's (binary) values.
func (f *Filter) hasBinary(t *term, b []byte) bool {
	if t.n == nil || (t.n.kind != kBinary && t.n.kind != kFixed) {
		return false
	}
	var buf [96]byte
	return f.has(t, appendBinary(buf[:0], b, t.n.enc))
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
	var scratch []byte
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
		t.each(f.json, func(_ int, c []byte) bool {
			var v fvalue
			v, scratch = canonValue(t.n, c, scratch[:0])
			inside = compareValues(minv, v) <= 0 && compareValues(v, maxv) <= 0
			return !inside
		})
		if !inside {
			return false
		}
	}
	return true
}

// canonValue reads the canonical text c of a value of column n (the echo
// holds only values the column accepts), decoding strings into scratch.
func canonValue(n *node, c, scratch []byte) (fvalue, []byte) {
	switch n.kind {
	case kBool:
		return fvalue{kind: 'b', b: c[0] == 't'}, scratch
	case kInt32, kInt64:
		i, _ := jsontext.ExactInt(c)
		return fvalue{kind: 'i', i: i}, scratch
	case kFloat32, kFloat64:
		bits := 64
		if n.kind == kFloat32 {
			bits = 32
		}
		fl, _ := strconv.ParseFloat(jsontext.UnsafeString(c), bits)
		return fvalue{kind: 'f', f: fl}, scratch
	}
	s, _, _ := jsontext.DecodeString(c, 0, scratch)
	if n.kind == kBinary || n.kind == kFixed {
		b, _ := decodeBinaryText(s[len(s):], s, n.enc)
		return fvalue{kind: 's', s: b}, b
	}
	return fvalue{kind: 's', s: s}, s
}

// statValue reads a canonical scalar of column n.
func statValue(n *node, text []byte) (fvalue, bool) {
	v, err := parseJSON(text)
	if err != nil || v.kind == 'a' || v.kind == 'o' || v.kind == 'z' {
		return fvalue{}, false
	}
	fv, prob := filterValue(n, v.kind, []byte(v.str), nil)
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

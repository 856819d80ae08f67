package sqlview

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/array"
	"modernc.org/sqlite/vtab"
)

// Ordered scans. SQLite runs GROUP BY (and ORDER BY, DISTINCT) by sorting
// every row it reads, in its own sorter, unless the table says it returns
// the rows in that order already. Its sort was the cost of a GROUP BY over
// a history (it spills runs to temporary files and merges them), so when
// the order is by plain columns log takes it on: it reads the whole scan,
// groups the rows by their key in a hash map, sorts the distinct keys and
// returns the groups in that order. With the few distinct keys a GROUP BY
// usually has, that is one pass and a small sort instead of a sort of every
// row. Rows with equal keys keep their offset order. The price is memory:
// the scan's projected columns are held until the query ends, so ORDER BY
// … LIMIT, where SQLite's sorter keeps only the top rows, stays SQLite's.
//
// The order is SQLite's: NULL first, then numbers, text (byte-wise: the
// BINARY collation) and blobs; DESC reverses it. A query naming a COLLATE
// anywhere is left to SQLite's sorter, as the vtab API does not say which
// collation an ORDER BY term uses.

// orderTerm is one ORDER BY term log returns rows in.
type orderTerm struct {
	col  int
	desc bool
}

// rowRef is a row of an ordered scan: its batch and its row in the batch.
type rowRef struct{ b, r int32 }

// value is cell i of column col, as SQLite sees it.
func (b *batch) value(col, i int) vtab.Value {
	if b.get[col] == nil || b.arrs[col].IsNull(i) {
		return nil
	}
	return b.get[col](i)
}

// sortAll reads the rest of the scan and orders its rows by order.
func (c *cursor) sortAll(order []orderTerm) error {
	var (
		refs   []rowRef
		gid    []int32 // per row in refs: its group
		groups = map[string]int32{}
		reps   [][]vtab.Value // per group: its key's values
		key    []byte
		vals   = make([]vtab.Value, len(order))
		keyFns = make([]func([]byte, int) []byte, len(order))
	)
	c.sorted = []*batch{}
	for c.rr.Next() {
		rec := c.rr.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		b := &batch{}
		if err := c.t.bind(b, rec); err != nil {
			return c.t.v.fail(err)
		}
		rec.Retain()
		b.rec = rec
		bi := int32(len(c.sorted))
		c.sorted = append(c.sorted, b)
		for k, o := range order {
			keyFns[k] = b.keyFunc(o.col)
		}
		for i := 0; i < b.n; i++ {
			key = key[:0]
			for k := range order {
				key = keyFns[k](key, i)
			}
			g, ok := groups[string(key)]
			if !ok {
				g = int32(len(reps))
				groups[string(key)] = g
				for k, o := range order {
					vals[k] = sqliteValue(b.value(o.col, i))
				}
				reps = append(reps, slices.Clone(vals))
			}
			refs = append(refs, rowRef{bi, int32(i)})
			gid = append(gid, g)
		}
	}
	if err := c.rr.Err(); err != nil {
		return c.t.v.fail(err)
	}
	// Sort the groups, then place the rows group by group (a counting
	// sort, stable, so equal keys keep their offset order).
	byKey := make([]int32, len(reps))
	for i := range byKey {
		byKey[i] = int32(i)
	}
	slices.SortFunc(byKey, func(a, b int32) int {
		for k, o := range order {
			if d := compareValues(reps[a][k], reps[b][k]); d != 0 {
				if o.desc {
					return -d
				}
				return d
			}
		}
		return 0
	})
	rank := make([]int32, len(reps))
	for r, g := range byKey {
		rank[g] = int32(r)
	}
	next := make([]int, len(reps)+1)
	for _, g := range gid {
		next[rank[g]+1]++
	}
	for i := 1; i < len(next); i++ {
		next[i] += next[i-1]
	}
	c.perm = make([]rowRef, len(refs))
	for i, g := range gid {
		r := rank[g]
		c.perm[next[r]] = refs[i]
		next[r]++
	}
	c.pos = 0
	if len(c.perm) == 0 {
		c.eof = true
		return nil
	}
	c.cur, c.i = c.sorted[c.perm[0].b], int(c.perm[0].r)
	return nil
}

// sqliteValue is v as SQLite stores it: a NaN becomes NULL.
func sqliteValue(v vtab.Value) vtab.Value {
	if f, ok := v.(float64); ok && math.IsNaN(f) {
		return nil
	}
	return v
}

// appendKey appends an encoding of v under which two values are equal
// exactly when SQLite's GROUP BY counts them equal.
func appendKey(dst []byte, v vtab.Value) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, 'n')
	case int64:
		return appendIntKey(dst, x)
	case float64:
		return appendFloatKey(dst, x)
	case string:
		return appendTextKey(dst, 's', x)
	case []byte:
		return appendTextKey(dst, 'b', x)
	}
	return append(dst, '?')
}

func appendIntKey(dst []byte, x int64) []byte {
	dst = append(dst, 'i')
	return binary.BigEndian.AppendUint64(dst, uint64(x))
}

func appendFloatKey(dst []byte, x float64) []byte {
	switch {
	case math.IsNaN(x):
		return append(dst, 'n') // SQLite stores NaN as NULL
	case x == math.Trunc(x) && x >= -(1<<63) && x < 1<<63:
		// A REAL equal to an integer groups with it (and -0.0 with 0).
		return appendIntKey(dst, int64(x))
	}
	dst = append(dst, 'f')
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(x))
}

func appendTextKey[T string | []byte](dst []byte, tag byte, x T) []byte {
	dst = append(dst, tag)
	dst = binary.AppendUvarint(dst, uint64(len(x)))
	return append(dst, x...)
}

// keyFunc appends the key of column col's cell i: straight from the
// array for the common types, through the SQLite value otherwise, with
// the same encoding either way (a column may arrive as different Arrow
// types in different batches).
func (b *batch) keyFunc(col int) func([]byte, int) []byte {
	arr := b.arrs[col]
	if arr == nil {
		return func(dst []byte, _ int) []byte { return append(dst, 'n') }
	}
	switch a := arr.(type) {
	case *array.String:
		return func(dst []byte, i int) []byte {
			if a.IsNull(i) {
				return append(dst, 'n')
			}
			return appendTextKey(dst, 's', a.Value(i))
		}
	case *array.Int64:
		return func(dst []byte, i int) []byte {
			if a.IsNull(i) {
				return append(dst, 'n')
			}
			return appendIntKey(dst, a.Value(i))
		}
	case *array.Float64:
		return func(dst []byte, i int) []byte {
			if a.IsNull(i) {
				return append(dst, 'n')
			}
			return appendFloatKey(dst, a.Value(i))
		}
	}
	return func(dst []byte, i int) []byte { return appendKey(dst, sqliteValue(b.value(col, i))) }
}

// compareValues orders two values as SQLite does with the BINARY
// collation: NULL, then numbers by value, then text, then blobs.
func compareValues(a, b vtab.Value) int {
	ca, cb := valueClass(a), valueClass(b)
	if ca != cb {
		return ca - cb
	}
	switch x := a.(type) {
	case int64:
		if y, ok := b.(int64); ok {
			return cmp.Compare(x, y)
		}
		return cmp.Compare(float64(x), b.(float64))
	case float64:
		if y, ok := b.(float64); ok {
			return cmp.Compare(x, y)
		}
		return cmp.Compare(x, float64(b.(int64)))
	case string:
		return strings.Compare(x, b.(string))
	case []byte:
		return bytes.Compare(x, b.([]byte))
	}
	return 0
}

func valueClass(v vtab.Value) int {
	switch v.(type) {
	case nil:
		return 0
	case int64, float64:
		return 1
	case string:
		return 2
	}
	return 3
}

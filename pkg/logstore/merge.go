package logstore

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/streamcast/streamcast/pkg/schema"
)

// Merger merges the per-column statistics of several parts (row groups
// of a file being written, or the records of a log) into one: the least
// min, the greatest max and the sum of the null counts. A column some part
// lacks bounds for gets none, so pruning then reads the file; a column
// some counted part lacks a null count for gets none either.
type Merger struct {
	sch   *schema.Schema
	parts int
	cols  map[string]*merged
	// last is the start of the last record AddRecord took, end the
	// greatest end; tangled is set by a record that overlaps one before
	// without lying inside it, or comes out of order.
	last, end int64
	tangled   bool
}

// merged is one column's statistics so far.
type merged struct {
	min, max json.RawMessage
	nulls    int64
	noBounds bool // some part had no bounds
	noNulls  bool // some counted part had no null count
}

// NewMerger returns a Merger for files of a stream with schema sch.
func NewMerger(sch *schema.Schema) *Merger {
	a := &Merger{sch: sch, cols: map[string]*merged{}}
	if !sch.IsAny() {
		for _, c := range sch.Columns() {
			a.cols[c.Name] = &merged{}
		}
	}
	return a
}

// Add merges the statistics of one part holding rows no part added before
// holds (a row group of the file being written), as Compute encodes them:
// its null counts add to the sum.
func (a *Merger) Add(encoded []byte) { a.add(encoded, true) }

// AddRecord merges the statistics of a file record holding offsets
// [start, end). Records of a log's tiers may overlap (a file both local
// and published, a compacted local file over its published inputs), so
// they must come ordered by start, and by end descending for equal
// starts: then a record that overlaps one added before lies inside it, its
// rows are counted already and its null counts are not added again. A
// record that only partly overlaps, or comes out of order, leaves the null
// counts unknown; bounds merge either way, since a min or max seen twice
// is the same.
func (a *Merger) AddRecord(start, end int64, encoded []byte) {
	switch {
	case a.parts == 0 || start >= a.end: // after every record so far
		a.add(encoded, true)
	case start >= a.last && end <= a.end:
		// Inside the record that reached a.end: it starts at or before
		// a.last, since records come ordered by start.
		a.add(encoded, false)
	default:
		a.add(encoded, false)
		a.tangled = true
	}
	a.last, a.end = start, max(a.end, end)
}

func (a *Merger) add(encoded []byte, count bool) {
	part, err := Decode(encoded)
	if err != nil {
		part = nil // unreadable: no statistics
	}
	a.parts++
	if a.sch.IsAny() {
		return
	}
	for i, c := range a.sch.Columns() {
		m := a.cols[c.Name]
		pc, ok := part.Column(c.Name)
		if count {
			if ok && pc.Nulls != nil {
				m.nulls += *pc.Nulls
			} else {
				m.noNulls = true
			}
		}
		if m.noBounds {
			continue
		}
		if !ok || !pc.HasBounds() {
			m.noBounds, m.min, m.max = true, nil, nil
			continue
		}
		if m.min == nil { // the first part
			m.min, m.max = pc.Min, pc.Max
			continue
		}
		lo, err1 := compareScalar(a.sch, i, pc.Min, m.min)
		hi, err2 := compareScalar(a.sch, i, pc.Max, m.max)
		if err1 != nil || err2 != nil {
			m.noBounds, m.min, m.max = true, nil, nil
			continue
		}
		if lo < 0 {
			m.min = pc.Min
		}
		if hi > 0 {
			m.max = pc.Max
		}
	}
}

// Columns returns the merged statistics of the columns that have any: a
// column with neither bounds nor a null count is left out. After no part
// at all it returns an empty map.
func (a *Merger) Columns() map[string]Column {
	out := make(map[string]Column, len(a.cols))
	if a.parts == 0 {
		return out
	}
	for name, m := range a.cols {
		var c Column
		if !m.noBounds {
			c.Min, c.Max = m.min, m.max
		}
		if !m.noNulls && !a.tangled {
			n := m.nulls
			c.Nulls = &n
		}
		if c.HasBounds() || c.Nulls != nil {
			out[name] = c
		}
	}
	return out
}

// Encode returns the merged statistics in the form Add reads.
func (a *Merger) Encode() ([]byte, error) {
	b, err := json.Marshal(a.Columns())
	if err != nil {
		return nil, fmt.Errorf("encode column statistics: %w", err)
	}
	return b, nil
}

// compareScalar orders two canonical JSON scalars of column col the way
// schema.MinMax does: numbers by value, strings and binary as bytes,
// false before true.
func compareScalar(sch *schema.Schema, col int, x, y json.RawMessage) (int, error) {
	c := sch.Columns()[col]
	switch c.Type.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
		a, err1 := strconv.ParseInt(string(x), 10, 64)
		b, err2 := strconv.ParseInt(string(y), 10, 64)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("not integers: %s, %s", x, y)
		}
		return cmp.Compare(a, b), nil
	case arrow.FLOAT32, arrow.FLOAT64:
		a, err1 := strconv.ParseFloat(string(x), 64)
		b, err2 := strconv.ParseFloat(string(y), 64)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("not numbers: %s, %s", x, y)
		}
		return cmp.Compare(a, b), nil
	case arrow.BOOL:
		a, b := string(x) == "true", string(y) == "true"
		switch {
		case a == b:
			return 0, nil
		case !a:
			return -1, nil
		}
		return 1, nil
	case arrow.STRING:
		var a, b string
		if json.Unmarshal(x, &a) != nil || json.Unmarshal(y, &b) != nil {
			return 0, fmt.Errorf("not strings: %s, %s", x, y)
		}
		return cmp.Compare(a, b), nil
	case arrow.BINARY, arrow.FIXED_SIZE_BINARY:
		a, err1 := decodeBinary(c.Encoding, x)
		b, err2 := decodeBinary(c.Encoding, y)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("not binary: %s, %s", x, y)
		}
		return bytes.Compare(a, b), nil
	}
	return 0, fmt.Errorf("column %s of type %s has no order", c.Name, c.Type)
}

func decodeBinary(enc schema.Encoding, raw json.RawMessage) ([]byte, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	if enc == schema.EncodingBase16 {
		return hex.DecodeString(s)
	}
	return base64.StdEncoding.DecodeString(s)
}

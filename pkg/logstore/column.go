package logstore

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/streamcast/streamcast/pkg/schema"
)

// Column is one column's statistics in a file record.
//
// A record's statistics are a JSON object of column name to an array
// [min, max, nulls]. Records written before null counts were kept hold
// [min, max] and only for columns with bounds; an array of two therefore
// means the null count is unknown. A bound is JSON null when the file has
// none for the column (struct, list and map columns, an all-null column, a
// float column holding NaN). Readers that take the first two elements
// only, as older ones do, still prune correctly: a null bound parses as no
// statistics.
type Column struct {
	// Min and Max are canonical JSON scalars as schema.MinMax returns
	// them, both nil when unknown.
	Min, Max json.RawMessage
	// Nulls is the number of null values, nil when unknown.
	Nulls *int64
}

// HasBounds reports whether c has a min and a max to prune by.
func (c Column) HasBounds() bool { return c.Min != nil && c.Max != nil }

// MarshalJSON writes c in the record form: [min, max] or [min, max, nulls].
func (c Column) MarshalJSON() ([]byte, error) {
	b := append([]byte{'['}, orNull(c.Min)...)
	b = append(b, ',')
	b = append(b, orNull(c.Max)...)
	if c.Nulls != nil {
		b = append(b, ',')
		b = strconv.AppendInt(b, *c.Nulls, 10)
	}
	return append(b, ']'), nil
}

func orNull(v json.RawMessage) []byte {
	if v == nil {
		return []byte("null")
	}
	return v
}

func notNull(v json.RawMessage) json.RawMessage {
	if len(v) == 0 || string(v) == "null" {
		return nil
	}
	return v
}

// Record is a file record's statistics as Decode reads them; Column looks
// one up. It keeps the elements raw so that a filtered scan, which decodes
// a record per file to prune it, pays for the columns it asks about only.
type Record map[string][3]json.RawMessage

// Decode reads a file record's statistics, old form or new. A record that
// does not parse is an error; callers treat it as a record with no
// statistics.
func Decode(encoded []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(encoded, &r); err != nil {
		return nil, fmt.Errorf("decode column statistics: %w", err)
	}
	return r, nil
}

// Column returns the statistics of column name, ok=false when the record
// has none. An array of two (a record older than null counts) leaves the
// third element nil, so its null count is unknown; so is one that is not
// a count. A null bound leaves both bounds nil.
func (r Record) Column(name string) (c Column, ok bool) {
	e, ok := r[name]
	if !ok {
		return c, false
	}
	c = Column{Min: notNull(e[0]), Max: notNull(e[1])}
	if c.Min == nil || c.Max == nil {
		c.Min, c.Max = nil, nil
	}
	if n, err := strconv.ParseInt(string(e[2]), 10, 64); err == nil && n >= 0 {
		c.Nulls = &n
	}
	return c, true
}

// Compute returns the encoded statistics of one file or row group of a
// stream with schema sch, whose declared columns are cols (in schema
// order): each column's min and max, when it has them, and its null count,
// which Arrow keeps with the array. It runs when a file is written, never
// on the append path.
func Compute(sch *schema.Schema, cols []arrow.Array) ([]byte, error) {
	return ComputeWithBounds(sch, cols, nil)
}

// ComputeWithBounds is Compute taking column i's min and max from
// bounds[i] instead of scanning cols[i] where bounds[i] is not nil: an
// array of the column's type holding its least and greatest values (as
// the Parquet writer recorded them, say). The null counts are cols'.
func ComputeWithBounds(sch *schema.Schema, cols, bounds []arrow.Array) ([]byte, error) {
	stats := map[string]Column{}
	if !sch.IsAny() {
		for i, c := range sch.Columns() {
			if i >= len(cols) {
				return nil, fmt.Errorf("column statistics: the record has %d declared columns, the schema %d", len(cols), len(sch.Columns()))
			}
			n := int64(cols[i].NullN())
			st := Column{Nulls: &n}
			from := cols[i]
			if i < len(bounds) && bounds[i] != nil {
				from = bounds[i]
			}
			if mn, mx, ok := sch.MinMax(i, from); ok {
				st.Min, st.Max = mn, mx
			}
			stats[c.Name] = st
		}
	}
	b, err := json.Marshal(stats)
	if err != nil {
		return nil, fmt.Errorf("encode column statistics: %w", err)
	}
	return b, nil
}

package colstats

import (
	"bytes"
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

// UnmarshalJSON reads the record form, old or new. A null count that is
// not a count reads as unknown rather than failing the whole record.
func (c *Column) UnmarshalJSON(b []byte) error {
	var parts []json.RawMessage
	if err := json.Unmarshal(b, &parts); err != nil {
		return err
	}
	if len(parts) < 2 || len(parts) > 3 {
		return fmt.Errorf("column statistics %s: want [min, max] or [min, max, nulls]", b)
	}
	*c = Column{Min: notNull(parts[0]), Max: notNull(parts[1])}
	if c.Min == nil || c.Max == nil {
		c.Min, c.Max = nil, nil
	}
	if len(parts) == 3 {
		if n, err := strconv.ParseInt(string(parts[2]), 10, 64); err == nil && n >= 0 {
			c.Nulls = &n
		}
	}
	return nil
}

func orNull(v json.RawMessage) []byte {
	if v == nil {
		return []byte("null")
	}
	return v
}

func notNull(v json.RawMessage) json.RawMessage {
	if v = bytes.TrimSpace(v); len(v) == 0 || string(v) == "null" {
		return nil
	}
	return v
}

// Decode reads a file record's statistics. A record that does not parse is
// an error; callers treat it as a record with no statistics.
func Decode(encoded []byte) (map[string]Column, error) {
	var cols map[string]Column
	if err := json.Unmarshal(encoded, &cols); err != nil {
		return nil, fmt.Errorf("decode column statistics: %w", err)
	}
	return cols, nil
}

// Compute returns the encoded statistics of one file or row group of a
// stream with schema sch, whose declared columns are cols (in schema
// order): each column's min and max, when it has them, and its null count,
// which Arrow keeps with the array. It runs when a file is written, never
// on the append path.
func Compute(sch *schema.Schema, cols []arrow.Array) ([]byte, error) {
	stats := map[string]Column{}
	if !sch.IsAny() {
		for i, c := range sch.Columns() {
			if i >= len(cols) {
				return nil, fmt.Errorf("column statistics: the record has %d declared columns, the schema %d", len(cols), len(sch.Columns()))
			}
			n := int64(cols[i].NullN())
			st := Column{Nulls: &n}
			if mn, mx, ok := sch.MinMax(i, cols[i]); ok {
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

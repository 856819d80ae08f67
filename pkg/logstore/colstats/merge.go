package colstats

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

// Merger merges the per-column min/max of several files or
// records into the statistics of the file made from them. A column some
// part lacks statistics for gets none: pruning then reads the file.
type Merger struct {
	sch   *schema.Schema
	parts int
	stats map[string][2]json.RawMessage
	gone  map[string]bool
}

// NewMerger returns a Merger for files of a stream with schema sch.
func NewMerger(sch *schema.Schema) *Merger {
	return &Merger{sch: sch, stats: map[string][2]json.RawMessage{}, gone: map[string]bool{}}
}

// Add merges one part's statistics, as logstore's columnStats encodes
// them (a JSON object of column name to [min, max]).
func (a *Merger) Add(encoded []byte) {
	var part map[string][2]json.RawMessage
	if err := json.Unmarshal(encoded, &part); err != nil {
		part = nil
	}
	a.parts++
	if a.sch.IsAny() {
		return
	}
	for i, c := range a.sch.Columns() {
		if a.gone[c.Name] {
			continue
		}
		mm, ok := part[c.Name]
		if !ok {
			a.gone[c.Name] = true
			delete(a.stats, c.Name)
			continue
		}
		cur, seen := a.stats[c.Name]
		if !seen {
			if a.parts == 1 {
				a.stats[c.Name] = mm
			} else {
				a.gone[c.Name] = true
			}
			continue
		}
		lo, err1 := compareScalar(a.sch, i, mm[0], cur[0])
		hi, err2 := compareScalar(a.sch, i, mm[1], cur[1])
		if err1 != nil || err2 != nil {
			a.gone[c.Name] = true
			delete(a.stats, c.Name)
			continue
		}
		if lo < 0 {
			cur[0] = mm[0]
		}
		if hi > 0 {
			cur[1] = mm[1]
		}
		a.stats[c.Name] = cur
	}
}

// Encode returns the merged statistics in the form Add reads.
func (a *Merger) Encode() ([]byte, error) {
	b, err := json.Marshal(a.stats)
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

package history

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/iceberg-go"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
)

// bound is a Bound with its values made comparable: int64, float64,
// string or bool.
type bound struct {
	col  string
	op   Op
	vals []any
}

// compileBounds checks and normalises bounds. A value of a type no
// statistic can be compared with makes its bound prune nothing.
func compileBounds(bs []Bound) ([]bound, error) {
	out := make([]bound, 0, len(bs))
	for _, b := range bs {
		switch b.Op {
		case OpEq, OpLt, OpLe, OpGt, OpGe:
			if len(b.Values) != 1 {
				return nil, fmt.Errorf("bound %s %s takes one value, got %d", b.Column, b.Op, len(b.Values))
			}
		case OpIn:
		default:
			return nil, fmt.Errorf("bound on %s: unknown comparison %q; use =, <, <=, >, >= or in", b.Column, b.Op)
		}
		nb := bound{col: b.Column, op: b.Op}
		ok := true
		for _, v := range b.Values {
			nv, good := normalize(v)
			if !good {
				ok = false
				break
			}
			nb.vals = append(nb.vals, nv)
		}
		if ok {
			out = append(out, nb)
		}
	}
	return out, nil
}

// normalize makes v one of int64, float64, string or bool.
func normalize(v any) (any, bool) {
	switch x := v.(type) {
	case int64, float64, string, bool:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case float32:
		return float64(x), true
	case []byte:
		return string(x), true
	}
	return nil, false
}

// compare orders a and b when they are comparable: integers and floats
// with each other, strings (and bytes) by bytes, false before true.
func compare(a, b any) (int, bool) {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return cmp.Compare(x, y), true
		case float64:
			return cmp.Compare(float64(x), y), true
		}
	case float64:
		switch y := b.(type) {
		case int64:
			return cmp.Compare(x, float64(y)), true
		case float64:
			return cmp.Compare(x, y), true
		}
	case string:
		if y, ok := b.(string); ok {
			return bytes.Compare([]byte(x), []byte(y)), true
		}
	case bool:
		if y, ok := b.(bool); ok {
			switch {
			case x == y:
				return 0, true
			case !x:
				return -1, true
			}
			return 1, true
		}
	}
	return 0, false
}

// mayMatch reports whether some value in [lo, hi] can satisfy b; nil
// (unknown) bounds and values it cannot compare always may.
func (b bound) mayMatch(lo, hi any) bool {
	if lo == nil || hi == nil {
		return true
	}
	le := func(x, y any) bool { c, ok := compare(x, y); return !ok || c <= 0 }
	lt := func(x, y any) bool { c, ok := compare(x, y); return !ok || c < 0 }
	switch b.op {
	case OpEq, OpIn:
		for _, v := range b.vals {
			if le(lo, v) && le(v, hi) {
				return true
			}
		}
		return false
	case OpLt:
		return lt(lo, b.vals[0])
	case OpLe:
		return le(lo, b.vals[0])
	case OpGt:
		return lt(b.vals[0], hi)
	case OpGe:
		return le(b.vals[0], hi)
	}
	return true
}

// skipPart reports whether the bounds prove part p holds no matching row
// in its cut: by its offset span, its streamcast_ts span, a column it
// lacks (which reads null, and null satisfies no comparison), and for a
// sealed or retired log (whose statistics no longer move) the column
// statistics in the stream metadata.
func skipPart(p *part, bs []bound) bool {
	if p.start >= p.end {
		return true
	}
	for _, b := range bs {
		switch b.col {
		case logstore.OffsetColumn:
			if !b.mayMatch(p.start, p.end-1) {
				return true
			}
			continue
		case logstore.TSColumn:
			if lo, hi, ok := p.tsSpan(); ok && !b.mayMatch(lo, hi) {
				return true
			}
			continue
		}
		i := p.fileSc.FieldIndices(b.col)
		if len(i) == 0 {
			return true
		}
		if p.lg.State == meta.Live {
			continue
		}
		st, ok := p.lg.Stats[b.col]
		if !ok {
			continue
		}
		t := p.fileSc.Field(i[0]).Type
		if !b.mayMatch(jsonStat(st.Min, t), jsonStat(st.Max, t)) {
			return true
		}
	}
	return false
}

// tsSpan is the streamcast_ts range of the part's files and tail.
func (p *part) tsSpan() (lo, hi int64, ok bool) {
	lo, hi = math.MaxInt64, math.MinInt64
	for _, f := range p.files {
		lo, hi = min(lo, f.tsLo), max(hi, f.tsHi)
	}
	for _, t := range p.tail {
		lo, hi = min(lo, t.ts), max(hi, t.ts)
	}
	return lo, hi, lo <= hi
}

// jsonStat decodes a statistic of the stream metadata for a column of
// type t; nil when it is null or of a type not compared.
func jsonStat(raw json.RawMessage, t arrow.DataType) any {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return nil
		}
		return n
	case arrow.FLOAT32, arrow.FLOAT64:
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return nil
		}
		return f
	case arrow.STRING, arrow.LARGE_STRING:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil
		}
		return s
	case arrow.BOOL:
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return nil
		}
		return b
	}
	return nil
}

// skipFile reports whether the manifest statistics of f prove it holds
// no row matching bs.
func skipFile(p *part, f *pfile, bs []bound) bool {
	for _, b := range bs {
		switch b.col {
		case logstore.OffsetColumn:
			if !b.mayMatch(f.lo, f.hi) {
				return true
			}
			continue
		case logstore.TSColumn:
			if !b.mayMatch(f.tsLo, f.tsHi) {
				return true
			}
			continue
		}
		if p.ice == nil {
			continue
		}
		fld, ok := p.ice.FindFieldByName(b.col)
		if !ok {
			return true // the log lacks it: null throughout
		}
		lo, hi := icebergBound(f.lower[fld.ID], fld.Type), icebergBound(f.upper[fld.ID], fld.Type)
		if !b.mayMatch(lo, hi) {
			return true
		}
	}
	return false
}

// icebergBound decodes an Iceberg single-value bound; nil when absent or
// of a type not compared.
func icebergBound(v []byte, t iceberg.Type) any {
	if v == nil {
		return nil
	}
	switch t.(type) {
	case iceberg.Int32Type:
		if len(v) == 4 {
			return int64(int32(binary.LittleEndian.Uint32(v)))
		}
	case iceberg.Int64Type:
		if len(v) == 8 {
			return int64(binary.LittleEndian.Uint64(v))
		}
	case iceberg.Float32Type:
		if len(v) == 4 {
			return float64(math.Float32frombits(binary.LittleEndian.Uint32(v)))
		}
	case iceberg.Float64Type:
		if len(v) == 8 {
			return math.Float64frombits(binary.LittleEndian.Uint64(v))
		}
	case iceberg.StringType:
		return string(v)
	case iceberg.BooleanType:
		if len(v) == 1 {
			return v[0] != 0
		}
	}
	return nil
}

// skipGroup reports whether the footer statistics of a row group prove it
// holds no row matching bs. leaf maps a top-level column name to its leaf
// column index (primitive columns only).
func skipGroup(rg *metadata.RowGroupMetaData, leaf func(string) int, bs []bound) bool {
	for _, b := range bs {
		i := leaf(b.col)
		if i < 0 {
			continue
		}
		cc, err := rg.ColumnChunk(i)
		if err != nil {
			continue
		}
		st, err := cc.Statistics()
		if err != nil || st == nil || !st.HasMinMax() {
			continue
		}
		var lo, hi any
		switch s := st.(type) {
		case *metadata.Int64Statistics:
			lo, hi = s.Min(), s.Max()
		case *metadata.Int32Statistics:
			lo, hi = int64(s.Min()), int64(s.Max())
		case *metadata.Float64Statistics:
			lo, hi = s.Min(), s.Max()
		case *metadata.Float32Statistics:
			lo, hi = float64(s.Min()), float64(s.Max())
		case *metadata.ByteArrayStatistics:
			lo, hi = string(s.Min()), string(s.Max())
		case *metadata.BooleanStatistics:
			lo, hi = s.Min(), s.Max()
		default:
			continue
		}
		if !b.mayMatch(lo, hi) {
			return true
		}
	}
	return false
}

package source

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamcast/streamcast/pkg/schema"
)

// plan maps a Parquet or Arrow file's columns onto the declared ones.
type plan struct {
	sch  *schema.Schema
	cols []schema.Column
	src  []int // src[k]: the file's column for declared column k; -1: absent, all null
}

// planColumns matches src's columns to the schema by name: every required
// column present (an optional one absent is null), nothing undeclared, no
// system column, and each castable without loss (checked on the types,
// before any row is read).
func planColumns(sch *schema.Schema, src *arrow.Schema) (*plan, error) {
	p := &plan{sch: sch, cols: sch.Columns()}
	byName := map[string]int{}
	for i, f := range src.Fields() {
		if f.Name == schema.ColumnOffset || f.Name == schema.ColumnTS {
			return nil, &RefusedError{Column: f.Name, Problem: "the source carries a system column; streamcast assigns offsets and stamps itself, so drop it from the source"}
		}
		if _, ok := sch.ColumnIndex(f.Name); !ok {
			return nil, &RefusedError{Column: f.Name, Problem: "the schema declares no such column"}
		}
		if _, dup := byName[f.Name]; dup {
			return nil, &RefusedError{Column: f.Name, Problem: "the source holds two columns of this name"}
		}
		byName[f.Name] = i
	}
	for _, c := range p.cols {
		i, ok := byName[c.Name]
		if !ok && !c.Required {
			// A column the stream may omit (a nullable one a migration
			// added, say) loads as null, as an NDJSON line or a CSV
			// header without it does.
			p.src = append(p.src, -1)
			continue
		}
		if !ok {
			return nil, &RefusedError{Column: c.Name, Problem: fmt.Sprintf("the source lacks this declared column (%s), which every row must have", typeName(c.Type))}
		}
		if err := castable(src.Field(i).Type, c.Type, c.Name); err != nil {
			return nil, err
		}
		p.src = append(p.src, i)
	}
	return p, nil
}

// typeName spells an Arrow type for messages.
func typeName(t arrow.DataType) string { return t.String() }

func lossy(from, to arrow.DataType, path string) error {
	return &RefusedError{Column: path, Problem: fmt.Sprintf("the source's %s does not convert to the declared %s without loss; convert the column in the source", typeName(from), typeName(to))}
}

// castable reports whether every value of type from converts to type to
// exactly.
func castable(from, to arrow.DataType, path string) error {
	if from.ID() == arrow.NULL {
		return nil // all null: the nullability check decides, row by row
	}
	switch to.ID() {
	case arrow.BOOL:
		if from.ID() == arrow.BOOL {
			return nil
		}
	case arrow.INT32:
		switch from.ID() {
		case arrow.INT8, arrow.INT16, arrow.INT32, arrow.UINT8, arrow.UINT16:
			return nil
		}
	case arrow.INT64:
		switch from.ID() {
		case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32:
			return nil
		}
	case arrow.FLOAT32:
		switch from.ID() {
		case arrow.FLOAT32, arrow.INT8, arrow.INT16, arrow.UINT8, arrow.UINT16:
			return nil
		}
	case arrow.FLOAT64:
		switch from.ID() {
		case arrow.FLOAT32, arrow.FLOAT64, arrow.INT8, arrow.INT16, arrow.INT32, arrow.UINT8, arrow.UINT16, arrow.UINT32:
			return nil
		}
	case arrow.STRING:
		switch from.ID() {
		case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
			return nil
		}
	case arrow.BINARY:
		switch from.ID() {
		case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW:
			return nil
		}
	case arrow.FIXED_SIZE_BINARY:
		if from.ID() == arrow.FIXED_SIZE_BINARY && from.(*arrow.FixedSizeBinaryType).ByteWidth == to.(*arrow.FixedSizeBinaryType).ByteWidth {
			return nil
		}
	case arrow.STRUCT:
		fs, ok := from.(*arrow.StructType)
		if !ok {
			break
		}
		ts := to.(*arrow.StructType)
		for _, f := range fs.Fields() {
			if _, ok := ts.FieldIdx(f.Name); !ok {
				return &RefusedError{Column: path + "." + f.Name, Problem: "the schema declares no such field"}
			}
		}
		for _, f := range ts.Fields() {
			i, ok := fs.FieldIdx(f.Name)
			if !ok {
				return &RefusedError{Column: path + "." + f.Name, Problem: fmt.Sprintf("the source lacks this declared field (%s)", typeName(f.Type))}
			}
			if err := castable(fs.Field(i).Type, f.Type, path+"."+f.Name); err != nil {
				return err
			}
		}
		return nil
	case arrow.MAP:
		if fm, ok := from.(*arrow.MapType); ok {
			tm := to.(*arrow.MapType)
			if err := castable(fm.KeyType(), tm.KeyType(), path+".key"); err != nil {
				return err
			}
			return castable(fm.ItemType(), tm.ItemType(), path+".value")
		}
	case arrow.LIST:
		if fl, ok := from.(*arrow.ListType); ok && from.ID() == arrow.LIST {
			return castable(fl.Elem(), to.(*arrow.ListType).Elem(), path+"[]")
		}
	}
	return lossy(from, to, path)
}

// convert returns rec's columns as the declared columns, cast and checked.
// A refusal names the first bad row (1-based within rec, to which the
// caller adds the rows before it) and its column.
func (p *plan) convert(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	n := rec.NumRows()
	cols := make([]arrow.Array, len(p.cols))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for k, c := range p.cols {
		if p.src[k] < 0 {
			cols[k] = array.MakeArrayOfNull(memory.DefaultAllocator, c.Type, int(n))
			continue
		}
		a, err := convertArray(rec.Column(p.src[k]), c.Type)
		if err != nil {
			return nil, &RefusedError{Column: c.Name, Problem: err.Error()}
		}
		cols[k] = a
	}
	if bad, col, prob := p.check(cols); bad >= 0 {
		return nil, &RefusedError{Location: Location{Row: int64(bad) + 1}, Column: col, Problem: prob}
	}
	return array.NewRecordBatch(p.sch.Arrow(), cols, n), nil
}

// convertArray casts arr to want, which castable allowed.
func convertArray(arr arrow.Array, want arrow.DataType) (arrow.Array, error) {
	if arr.DataType().ID() == arrow.NULL {
		return array.MakeArrayOfNull(memory.DefaultAllocator, want, arr.Len()), nil
	}
	d, err := convertData(arr.Data(), want)
	if err != nil {
		return nil, err
	}
	defer d.Release()
	return array.MakeFromData(d), nil
}

func convertData(d arrow.ArrayData, want arrow.DataType) (arrow.ArrayData, error) {
	from := d.DataType()
	switch want.ID() {
	case arrow.STRUCT:
		fs, ts := from.(*arrow.StructType), want.(*arrow.StructType)
		children := make([]arrow.ArrayData, len(ts.Fields()))
		release := func() {
			for _, c := range children {
				if c != nil {
					c.Release()
				}
			}
		}
		for k, f := range ts.Fields() {
			i, _ := fs.FieldIdx(f.Name)
			c, err := convertData(d.Children()[i], f.Type)
			if err != nil {
				release()
				return nil, err
			}
			children[k] = c
		}
		out := array.NewData(want, d.Len(), d.Buffers()[:1], children, d.NullN(), d.Offset())
		release()
		return out, nil
	case arrow.MAP:
		child, err := convertEntries(d.Children()[0], want.(*arrow.MapType))
		if err != nil {
			return nil, err
		}
		out := array.NewData(want, d.Len(), d.Buffers(), []arrow.ArrayData{child}, d.NullN(), d.Offset())
		child.Release()
		return out, nil
	case arrow.LIST:
		child, err := convertData(d.Children()[0], want.(*arrow.ListType).Elem())
		if err != nil {
			return nil, err
		}
		out := array.NewData(want, d.Len(), d.Buffers(), []arrow.ArrayData{child}, d.NullN(), d.Offset())
		child.Release()
		return out, nil
	}
	if arrow.TypeEqual(from, want) {
		return array.NewData(want, d.Len(), d.Buffers(), d.Children(), d.NullN(), d.Offset()), nil
	}
	if from.ID() == arrow.NULL {
		a := array.MakeArrayOfNull(memory.DefaultAllocator, want, d.Len())
		defer a.Release()
		out := a.Data()
		out.Retain()
		return out, nil
	}
	src := array.MakeFromData(d)
	defer src.Release()
	out, err := compute.CastArray(context.Background(), src, compute.SafeCastOptions(want))
	if err != nil {
		return nil, fmt.Errorf("cast %s to %s: %w", typeName(from), typeName(want), err)
	}
	defer out.Release()
	od := out.Data()
	od.Retain()
	return od, nil
}

// convertEntries casts a map's entries, a struct of key and value, to
// those of want. They go by position, not by name: the names of a map's
// entry fields are not part of its type (castable compares only the key
// and item types), and a file may call them anything.
func convertEntries(d arrow.ArrayData, want *arrow.MapType) (arrow.ArrayData, error) {
	if len(d.Children()) != 2 {
		return nil, fmt.Errorf("the file is damaged: a map's entries have %d fields, not a key and a value", len(d.Children()))
	}
	key, err := convertData(d.Children()[0], want.KeyType())
	if err != nil {
		return nil, err
	}
	defer key.Release()
	item, err := convertData(d.Children()[1], want.ItemType())
	if err != nil {
		return nil, err
	}
	defer item.Release()
	return array.NewData(want.Elem(), d.Len(), d.Buffers()[:1], []arrow.ArrayData{key, item}, d.NullN(), d.Offset()), nil
}

// check finds the first row a column refuses: a null where the schema
// allows none, NaN or ±Inf, invalid UTF-8, a duplicate map key. It
// returns the row (-1 when none), the column path and the problem.
func (p *plan) check(cols []arrow.Array) (row int, col, problem string) {
	row = -1
	for k, c := range p.cols {
		limit := cols[k].Len()
		if row >= 0 {
			limit = row
		}
		if r, path, prob := checkColumn(c, cols[k], limit); r >= 0 && (row < 0 || r < row) {
			row, col, problem = r, path, prob
		}
	}
	return row, col, problem
}

// checkColumn checks rows [0, limit) of a top-level column.
func checkColumn(c schema.Column, a arrow.Array, limit int) (int, string, string) {
	if !c.Nullable && a.NullN() > 0 {
		for i := range limit {
			if a.IsNull(i) {
				return i, c.Name, "null, and the column is not nullable"
			}
		}
	}
	switch v := a.(type) {
	case *array.Float64:
		vals := v.Float64Values()
		for i := range limit {
			if f := vals[i]; (math.IsNaN(f) || math.IsInf(f, 0)) && v.IsValid(i) {
				return i, c.Name, fmt.Sprintf("%v has no JSON form; streamcast refuses NaN and infinities", f)
			}
		}
		return -1, "", ""
	case *array.Float32:
		vals := v.Float32Values()
		for i := range limit {
			if f := float64(vals[i]); (math.IsNaN(f) || math.IsInf(f, 0)) && v.IsValid(i) {
				return i, c.Name, fmt.Sprintf("%v has no JSON form; streamcast refuses NaN and infinities", f)
			}
		}
		return -1, "", ""
	case *array.String:
		if limit == 0 {
			return -1, "", ""
		}
		if utf8.Valid(v.ValueBytes()) {
			return -1, "", ""
		}
		for i := range limit {
			if v.IsValid(i) && !utf8.ValidString(v.Value(i)) {
				return i, c.Name, "the text is not valid UTF-8"
			}
		}
		return -1, "", ""
	case *array.Struct, *array.List, *array.Map:
		for i := range limit {
			if a.IsNull(i) {
				continue
			}
			if path, prob := checkValue(c, a, i, c.Name); prob != "" {
				return i, path, prob
			}
		}
	}
	return -1, "", ""
}

// checkValue checks the non-null value at i of a nested column c.
func checkValue(c schema.Column, a arrow.Array, i int, path string) (string, string) {
	switch v := a.(type) {
	case *array.Float64:
		if f := v.Value(i); math.IsNaN(f) || math.IsInf(f, 0) {
			return path, fmt.Sprintf("%v has no JSON form; streamcast refuses NaN and infinities", f)
		}
	case *array.Float32:
		if f := float64(v.Value(i)); math.IsNaN(f) || math.IsInf(f, 0) {
			return path, fmt.Sprintf("%v has no JSON form; streamcast refuses NaN and infinities", f)
		}
	case *array.String:
		if !utf8.ValidString(v.Value(i)) {
			return path, "the text is not valid UTF-8"
		}
	case *array.Struct:
		for k, f := range c.Children {
			fa := v.Field(k)
			p := path + "." + f.Name
			if fa.IsNull(i) {
				if !f.Nullable {
					return p, "null, and the field is not nullable"
				}
				continue
			}
			if pp, prob := checkValue(f, fa, i, p); prob != "" {
				return pp, prob
			}
		}
	case *array.Map:
		lo, hi := v.ValueOffsets(i)
		keys, items := v.Keys(), v.Items()
		seen := map[string]bool{}
		for j := int(lo); j < int(hi); j++ {
			key := keys.(*array.String).Value(j)
			p := path + "[" + strconv.Quote(key) + "]"
			if !utf8.ValidString(key) {
				return p, "the key is not valid UTF-8"
			}
			if seen[key] {
				return p, "the key appears twice"
			}
			seen[key] = true
			if items.IsNull(j) {
				if !c.Children[1].Nullable {
					return p, "null, and the map's values are not nullable"
				}
				continue
			}
			if pp, prob := checkValue(c.Children[1], items, j, p); prob != "" {
				return pp, prob
			}
		}
	case *array.List:
		lo, hi := v.ValueOffsets(i)
		vals := v.ListValues()
		for j := int(lo); j < int(hi); j++ {
			p := path + "[" + strconv.Itoa(j-int(lo)) + "]"
			if vals.IsNull(j) {
				if !c.Children[0].Nullable {
					return p, "null, and the list's items are not nullable"
				}
				continue
			}
			if pp, prob := checkValue(c.Children[0], vals, j, p); prob != "" {
				return pp, prob
			}
		}
	}
	return "", ""
}

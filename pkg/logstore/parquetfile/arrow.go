package parquetfile

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
)

// fieldIDKey is the Arrow field metadata key pqarrow writes as a Parquet
// field id.
const fieldIDKey = "PARQUET:field_id"

// WithFieldIDs returns sc with every field, nested ones too, carrying the
// field id ice gives it, so the Parquet files written with it map onto the
// published table's columns by id, as the Iceberg spec prefers (readers
// that ignore the table's name mapping need it). ice must have been made
// from sc: the two have the same shape.
func WithFieldIDs(sc *arrow.Schema, ice *iceberg.Schema) (*arrow.Schema, error) {
	fields := make([]arrow.Field, sc.NumFields())
	for i, f := range sc.Fields() {
		nf := ice.Fields()[i]
		if nf.Name != f.Name {
			return nil, fmt.Errorf("column %d is %s in Arrow, %s in Iceberg", i, f.Name, nf.Name)
		}
		var err error
		if fields[i], err = annotate(f, nf.ID, nf.Type); err != nil {
			return nil, fmt.Errorf("column %s: %w", f.Name, err)
		}
	}
	return arrow.NewSchema(fields, nil), nil
}

func annotate(f arrow.Field, id int, t iceberg.Type) (arrow.Field, error) {
	keys, vals := []string{fieldIDKey}, []string{strconv.Itoa(id)}
	for i, k := range f.Metadata.Keys() {
		if k != fieldIDKey {
			keys, vals = append(keys, k), append(vals, f.Metadata.Values()[i])
		}
	}
	f.Metadata = arrow.NewMetadata(keys, vals)
	switch at := f.Type.(type) {
	case *arrow.StructType:
		st, ok := t.(*iceberg.StructType)
		if !ok || len(st.FieldList) != at.NumFields() {
			return f, fmt.Errorf("struct %s has no matching Iceberg struct", f.Name)
		}
		children := make([]arrow.Field, at.NumFields())
		for i, c := range at.Fields() {
			var err error
			if children[i], err = annotate(c, st.FieldList[i].ID, st.FieldList[i].Type); err != nil {
				return f, err
			}
		}
		f.Type = arrow.StructOf(children...)
	case *arrow.ListType:
		lt, ok := t.(*iceberg.ListType)
		if !ok {
			return f, fmt.Errorf("list %s has no matching Iceberg list", f.Name)
		}
		elem, err := annotate(at.ElemField(), lt.ElementID, lt.Element)
		if err != nil {
			return f, err
		}
		f.Type = arrow.ListOfField(elem)
	case *arrow.MapType:
		mt, ok := t.(*iceberg.MapType)
		if !ok {
			return f, fmt.Errorf("map %s has no matching Iceberg map", f.Name)
		}
		key, err := annotate(at.KeyField(), mt.KeyID, mt.KeyType)
		if err != nil {
			return f, err
		}
		item, err := annotate(at.ItemField(), mt.ValueID, mt.ValueType)
		if err != nil {
			return f, err
		}
		m := arrow.MapOfFields(key, item)
		m.KeysSorted = at.KeysSorted
		f.Type = m
	}
	return f, nil
}

// Sortable reports whether a column of type t can order a file.
func Sortable(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT32, arrow.FLOAT64, arrow.BOOL,
		arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY:
		return true
	}
	return false
}

// compareFunc compares rows i and j of one column; nulls sort first.
type compareFunc func(i, j int) int

func columnCompare(a arrow.Array) (compareFunc, error) {
	var cf compareFunc
	switch a := a.(type) {
	case *array.Int8:
		cf = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
	case *array.Int16:
		cf = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
	case *array.Int32:
		cf = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
	case *array.Int64:
		cf = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
	case *array.Uint8:
		cf = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
	case *array.Uint16:
		cf = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
	case *array.Uint32:
		cf = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
	case *array.Uint64:
		cf = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
	case *array.Float32:
		cf = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
	case *array.Float64:
		cf = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
	case *array.Boolean:
		cf = func(i, j int) int {
			x, y := a.Value(i), a.Value(j)
			switch {
			case x == y:
				return 0
			case !x:
				return -1
			}
			return 1
		}
	case *array.String:
		cf = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
	case *array.LargeString:
		cf = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
	case *array.Binary:
		cf = func(i, j int) int { return bytes.Compare(a.Value(i), a.Value(j)) }
	case *array.LargeBinary:
		cf = func(i, j int) int { return bytes.Compare(a.Value(i), a.Value(j)) }
	case *array.FixedSizeBinary:
		cf = func(i, j int) int { return bytes.Compare(a.Value(i), a.Value(j)) }
	default:
		return nil, fmt.Errorf("cannot sort by a column of type %s", a.DataType())
	}
	if a.NullN() == 0 {
		return cf, nil
	}
	return func(i, j int) int {
		ni, nj := a.IsNull(i), a.IsNull(j)
		switch {
		case ni && nj:
			return 0
		case ni:
			return -1
		case nj:
			return 1
		}
		return cf(i, j)
	}, nil
}

// Sort returns rec's rows ordered by the given columns, ties kept in
// their current (offset) order: rec itself (retained) when they are in
// that order already.
func Sort(rec arrow.RecordBatch, cols []int) (arrow.RecordBatch, error) {
	cmps := make([]compareFunc, len(cols))
	for k, c := range cols {
		f, err := columnCompare(rec.Column(c))
		if err != nil {
			return nil, fmt.Errorf("sort by %s: %w", rec.ColumnName(c), err)
		}
		cmps[k] = f
	}
	n := int(rec.NumRows())
	cmp := func(x, y int) int {
		for _, f := range cmps {
			if c := f(x, y); c != 0 {
				return c
			}
		}
		return 0
	}
	// Rows already in order (a source sorted by time, say) need no copy.
	sorted := true
	for i := 1; i < n && sorted; i++ {
		sorted = cmp(i-1, i) <= 0
	}
	if sorted {
		rec.Retain()
		return rec, nil
	}
	perm := make([]int32, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortStableFunc(perm, func(x, y int32) int { return cmp(int(x), int(y)) })
	return Take(rec, perm)
}

// Take returns the rows of rec at the given indexes, in that order.
func Take(rec arrow.RecordBatch, idx []int32) (arrow.RecordBatch, error) {
	mem := memory.DefaultAllocator
	ib := array.NewInt32Builder(mem)
	ib.AppendValues(idx, nil)
	indices := ib.NewArray()
	ib.Release()
	defer indices.Release()
	ctx := compute.WithAllocator(context.Background(), mem)
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		c, err := compute.TakeArrayOpts(ctx, rec.Column(i), indices, compute.TakeOptions{BoundsCheck: false})
		if err != nil {
			return nil, fmt.Errorf("reorder column %s: %w", rec.ColumnName(i), err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(len(idx))), nil
}

// Concat concatenates records of one schema into one (a record alone is
// returned retained, not copied).
func Concat(sc *arrow.Schema, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(recs) == 1 {
		recs[0].Retain()
		return recs[0], nil
	}
	cols := make([]arrow.Array, sc.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	parts := make([]arrow.Array, len(recs))
	for i := range cols {
		for k, r := range recs {
			parts[k] = r.Column(i)
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			return nil, fmt.Errorf("concatenate column %s: %w", sc.Field(i).Name, err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(sc, cols, n), nil
}

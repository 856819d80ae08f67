package source

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// arrow-go builds a Parquet column's arrays from the levels and pages it
// decodes without checking that they agree: a damaged file can give a
// struct a child shorter than itself, or a values buffer shorter than the
// array's length, and reading such an array indexes past its end. So
// every batch a file yields has its shape checked before anything reads
// a value from it.

// errDamagedShape is wrapped by every refusal of a batch's shape.
var errDamagedShape = errors.New("the file is damaged")

// maxShapeDepth bounds how deep checkShape follows nested types, well
// past anything a schema declares.
const maxShapeDepth = 64

// maxNullValues bounds the length of an array of Arrow's null type, the one
// kind whose length no buffer backs: far more rows than a batch of any
// writer holds, and few enough that the column it converts to fits in
// memory (16M values, 128 MB as int64).
const maxNullValues = 1 << 24

// checkBatch checks the shape of every column of rec.
func checkBatch(rec arrow.RecordBatch) error {
	for i, c := range rec.Columns() {
		if int64(c.Len()) != rec.NumRows() {
			return fmt.Errorf("%w: column %q holds %d rows in a batch of %d", errDamagedShape, rec.ColumnName(i), c.Len(), rec.NumRows())
		}
		if err := checkShape(c.Data(), 0); err != nil {
			return fmt.Errorf("column %q: %w", rec.ColumnName(i), err)
		}
	}
	return nil
}

// offsetTyped is a type whose values are ranges of a buffer or of a
// child array, given by offsets: binary, string, list, map.
type offsetTyped interface {
	OffsetTypeTraits() arrow.OffsetTraits
}

// checkShape checks that d's buffers and children hold every value its
// offset and length claim: a bitmap of enough bits, fixed-width values of
// enough bytes, offsets that rise and stay inside the data or child they
// index, and children at least as long as a struct.
func checkShape(d arrow.ArrayData, depth int) error {
	if depth > maxShapeDepth {
		return fmt.Errorf("%w: types nested deeper than %d", errDamagedShape, maxShapeDepth)
	}
	dt := d.DataType()
	if d.Offset() < 0 || d.Len() < 0 {
		return fmt.Errorf("%w: a %s array of offset %d and length %d", errDamagedShape, dt, d.Offset(), d.Len())
	}
	n := int64(d.Offset()) + int64(d.Len())
	bufs := d.Buffers()
	lay := dt.Layout()
	if dt.ID() == arrow.NULL {
		// A null array has no buffers, so nothing in the file bounds the
		// length it claims, and converting it to a declared column
		// allocates that many values: a 2 KB stream claimed 7e17.
		if n > maxNullValues {
			return fmt.Errorf("%w: a null array claims %d values, more than the %d a batch may hold", errDamagedShape, n, maxNullValues)
		}
		return nil
	}
	if len(bufs) < len(lay.Buffers) {
		return fmt.Errorf("%w: a %s array has %d buffers, not %d", errDamagedShape, dt, len(bufs), len(lay.Buffers))
	}
	size := func(i int) int64 {
		if bufs[i] == nil {
			return 0
		}
		return int64(bufs[i].Len())
	}
	short := func(i int, need int64) error {
		return fmt.Errorf("%w: buffer %d of a %s array of %d values holds %d bytes, not %d", errDamagedShape, i, dt, n, size(i), need)
	}
	if ot, ok := dt.(offsetTyped); ok && dt.ID() != arrow.LIST_VIEW && dt.ID() != arrow.LARGE_LIST_VIEW {
		return checkOffsets(d, ot.OffsetTypeTraits().BytesRequired(1), depth)
	}
	for i, spec := range lay.Buffers {
		switch spec.Kind {
		case arrow.KindBitmap:
			// An empty validity bitmap means no nulls (arrow-go reads
			// it only when it has bytes), so the array must not declare
			// any: one that declares a count it cannot back, or leaves
			// the count unknown (negative), makes arrow-go count the
			// bits of the empty bitmap, and that panics.
			if i == 0 && size(0) == 0 && n > 0 && d.NullN() != 0 {
				return fmt.Errorf("%w: a %s array of %d values declares %d nulls and has no validity bitmap", errDamagedShape, dt, n, d.NullN())
			}
			if (i == 0 && size(0) == 0) || n == 0 {
				continue
			}
			if need := (n + 7) / 8; size(i) < need {
				return short(i, need)
			}
		case arrow.KindFixedWidth:
			if need := n * int64(spec.ByteWidth); size(i) < need {
				return short(i, need)
			}
		}
	}
	switch dt.ID() {
	case arrow.STRUCT:
		for _, c := range d.Children() {
			if int64(c.Len()) < n {
				return fmt.Errorf("%w: a struct of %d values has a field of %d", errDamagedShape, n, c.Len())
			}
			if err := checkShape(c, depth+1); err != nil {
				return err
			}
		}
	case arrow.FIXED_SIZE_LIST:
		w := int64(dt.(*arrow.FixedSizeListType).Len())
		if len(d.Children()) != 1 || int64(d.Children()[0].Len()) < n*w {
			return fmt.Errorf("%w: a fixed-size list's values are too few", errDamagedShape)
		}
		return checkShape(d.Children()[0], depth+1)
	case arrow.STRING_VIEW, arrow.BINARY_VIEW, arrow.LIST_VIEW, arrow.LARGE_LIST_VIEW, arrow.DICTIONARY, arrow.RUN_END_ENCODED, arrow.SPARSE_UNION, arrow.DENSE_UNION:
		// Rare in a file and refused or cast whole: leave them to
		// arrow-go's own validation, which read's recover guards.
		a := array.MakeFromData(d)
		defer a.Release()
		if v, ok := a.(interface{ ValidateFull() error }); ok {
			if err := v.ValidateFull(); err != nil {
				return fmt.Errorf("%w: %w", errDamagedShape, err)
			}
		}
	}
	return nil
}

// checkOffsets checks an offsets-typed array (binary, string, list, map)
// of offsets w bytes wide: its offsets rise and end inside its data
// buffer or its child.
func checkOffsets(d arrow.ArrayData, w int, depth int) error {
	dt := d.DataType()
	n := int64(d.Offset()) + int64(d.Len())
	bufs := d.Buffers()
	if bufs[0] != nil && bufs[0].Len() > 0 && int64(bufs[0].Len()) < (n+7)/8 {
		return fmt.Errorf("%w: the validity of a %s array of %d values is %d bytes", errDamagedShape, dt, n, bufs[0].Len())
	}
	var limit int64 // what the offsets index: data bytes, or child values
	var child arrow.ArrayData
	switch dt.ID() {
	case arrow.LIST, arrow.LARGE_LIST, arrow.MAP:
		if len(d.Children()) != 1 {
			return fmt.Errorf("%w: a %s array has %d children, not 1", errDamagedShape, dt, len(d.Children()))
		}
		child = d.Children()[0]
		limit = int64(child.Len())
	default:
		if len(bufs) < 3 {
			return fmt.Errorf("%w: a %s array has %d buffers, not 3", errDamagedShape, dt, len(bufs))
		}
		if bufs[2] != nil {
			limit = int64(bufs[2].Len())
		}
	}
	if d.Len() > 0 {
		var offs []byte
		if bufs[1] != nil {
			offs = bufs[1].Bytes()
		}
		if int64(len(offs)) < (n+1)*int64(w) {
			return fmt.Errorf("%w: the offsets of a %s array of %d values are %d bytes", errDamagedShape, dt, n, len(offs))
		}
		at := func(i int64) int64 {
			if w == 4 {
				return int64(int32(binary.LittleEndian.Uint32(offs[i*4:])))
			}
			return int64(binary.LittleEndian.Uint64(offs[i*8:]))
		}
		prev := at(int64(d.Offset()))
		if prev < 0 {
			return fmt.Errorf("%w: a %s array has a negative offset", errDamagedShape, dt)
		}
		for i := int64(d.Offset()) + 1; i <= n; i++ {
			o := at(i)
			if o < prev {
				return fmt.Errorf("%w: the offsets of a %s array fall", errDamagedShape, dt)
			}
			prev = o
		}
		if prev > limit {
			return fmt.Errorf("%w: a %s array's offsets reach %d, past the %d it has", errDamagedShape, dt, prev, limit)
		}
	}
	if child != nil {
		return checkShape(child, depth+1)
	}
	return nil
}

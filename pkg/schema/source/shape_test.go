package source

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A damaged Parquet file made arrow-go hand out a struct whose field was
// shorter than the struct (the seed struct-child-short of FuzzParquet);
// reading a value from it indexed past the end. checkShape refuses such
// a batch, and each way an array can claim more than it holds.
func TestCheckShapeRefusesArraysThatClaimMoreThanTheyHold(t *testing.T) {
	i64 := func(n int) arrow.ArrayData {
		b := array.NewInt64Builder(memory.DefaultAllocator)
		defer b.Release()
		for i := range n {
			b.Append(int64(i))
		}
		a := b.NewArray()
		d := a.Data()
		d.Retain()
		a.Release()
		return d
	}
	st := arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64})
	short := memory.NewBufferBytes(make([]byte, 8))
	offs := memory.NewBufferBytes([]byte{0, 0, 0, 0, 9, 0, 0, 0}) // one value of 9 bytes
	falling := memory.NewBufferBytes([]byte{5, 0, 0, 0, 1, 0, 0, 0})
	for _, tc := range []struct {
		name string
		d    arrow.ArrayData
		ok   bool
	}{
		{"whole struct", array.NewData(st, 2, []*memory.Buffer{nil}, []arrow.ArrayData{i64(2)}, 0, 0), true},
		{"struct field shorter than the struct", array.NewData(st, 2, []*memory.Buffer{nil}, []arrow.ArrayData{i64(1)}, 0, 0), false},
		{"values buffer shorter than the length", array.NewData(arrow.PrimitiveTypes.Int64, 3, []*memory.Buffer{nil, short}, nil, 0, 0), false},
		{"no validity bitmap", array.NewData(arrow.PrimitiveTypes.Int64, 1, []*memory.Buffer{memory.NewBufferBytes(nil), short}, nil, 0, 0), true},
		{"validity bitmap shorter than the length", array.NewData(arrow.PrimitiveTypes.Int64, 9, []*memory.Buffer{memory.NewBufferBytes([]byte{0xff}), memory.NewBufferBytes(make([]byte, 72))}, nil, 0, 0), false},
		{"string offsets past the data", array.NewData(arrow.BinaryTypes.String, 1, []*memory.Buffer{nil, offs, memory.NewBufferBytes([]byte("abc"))}, nil, 0, 0), false},
		{"string offsets that fall", array.NewData(arrow.BinaryTypes.String, 1, []*memory.Buffer{nil, falling, memory.NewBufferBytes([]byte("abcdef"))}, nil, 0, 0), false},
		{"list offsets past the values", array.NewData(arrow.ListOf(arrow.PrimitiveTypes.Int64), 1, []*memory.Buffer{nil, offs}, []arrow.ArrayData{i64(2)}, 0, 0), false},
		{"list of its values", array.NewData(arrow.ListOf(arrow.PrimitiveTypes.Int64), 1, []*memory.Buffer{nil, offs}, []arrow.ArrayData{i64(9)}, 0, 0), true},
	} {
		err := checkShape(tc.d, 0)
		if tc.ok && err != nil {
			t.Errorf("%s: refused: %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, errDamagedShape) {
			t.Errorf("%s: got %v, want a refusal as damaged", tc.name, err)
		}
	}
}

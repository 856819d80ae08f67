package parquetfile

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// flatSchema has a column of each flat kind a log stores, nullable and
// not, with the field ids a log's file schema carries.
func flatSchema() *arrow.Schema {
	id := func(n int) arrow.Metadata { return arrow.NewMetadata([]string{fieldIDKey}, []string{strconv.Itoa(n)}) }
	return arrow.NewSchema([]arrow.Field{
		{Name: "streamcast_offset", Type: arrow.PrimitiveTypes.Int64, Metadata: id(1)},
		{Name: "sym", Type: arrow.BinaryTypes.String, Metadata: id(2)},
		{Name: "px", Type: arrow.PrimitiveTypes.Float64, Nullable: true, Metadata: id(3)},
		{Name: "side", Type: arrow.PrimitiveTypes.Int32, Metadata: id(4)},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true, Metadata: id(5)},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: id(6)},
		{Name: "raw", Type: arrow.BinaryTypes.Binary, Nullable: true, Metadata: id(7)},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true, Metadata: id(8)},
		{Name: "gone", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: id(9)},
	}, nil)
}

// flatRows builds rows [from, to) of flatSchema: nulls here and there,
// and an all-null column.
func flatRows(sc *arrow.Schema, from, to int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := from; i < to; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append([]string{"BTC-USD", "ETH-USD", "SOL-USD"}[i%3])
		if i%7 == 0 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Float64Builder).Append(60000 + float64(i%1000)/4)
		}
		b.Field(3).(*array.Int32Builder).Append(int32(i % 2))
		if i%5 == 0 {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.BooleanBuilder).Append(i%3 == 0)
		}
		if i%10 == 0 {
			b.Field(5).AppendNull()
		} else {
			b.Field(5).(*array.StringBuilder).Append("t" + strconv.Itoa(i*7919))
		}
		b.Field(6).(*array.BinaryBuilder).Append([]byte{byte(i), byte(i >> 8)})
		b.Field(7).(*array.Float32Builder).Append(float32(i) / 3)
		b.Field(8).AppendNull()
	}
	return b.NewRecordBatch()
}

// TestConcurrentWriterWritesTheSameFile: a file written with its columns
// encoded on several goroutines is byte for byte the file Create writes
// one column after another, over row groups of many pages, with nulls,
// no nulls and all nulls; so what ingest writes is what seal and
// compaction would.
func TestConcurrentWriterWritesTheSameFile(t *testing.T) {
	sc := flatSchema()
	if !allFlat(sc) {
		t.Fatal("the test's schema is not flat")
	}
	dir := t.TempDir()
	write := func(name string, workers int) []byte {
		p := filepath.Join(dir, name)
		w, err := CreateConcurrent(p, sc, workers)
		if err != nil {
			t.Fatal(err)
		}
		if (w.cc != nil) != (workers > 1) {
			t.Fatalf("%d workers: concurrent %v", workers, w.cc != nil)
		}
		for _, g := range [][2]int{{0, 150_000}, {150_000, 150_001}, {150_001, 230_000}} {
			rec := flatRows(sc, g[0], g[1])
			err := w.WriteGroup(rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	serial, conc := write("serial.parquet", 1), write("concurrent.parquet", 3)
	if !bytes.Equal(serial, conc) {
		n := 0
		for n < min(len(serial), len(conc)) && serial[n] == conc[n] {
			n++
		}
		t.Fatalf("the concurrent writer's file (%d bytes) differs from the serial one's (%d bytes) from byte %d", len(conc), len(serial), n)
	}
	t.Logf("%d bytes, identical", len(serial))
}

// TestConcurrentWriterLeavesNestedSchemasToPqarrow: a schema with a
// nested column is written by pqarrow on one goroutine, whatever the
// workers asked.
func TestConcurrentWriterLeavesNestedSchemasToPqarrow(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
	w, err := CreateConcurrent(filepath.Join(t.TempDir(), "f.parquet"), sc, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if w.cc != nil || w.fw == nil {
		t.Fatal("a nested schema went to the concurrent writer")
	}
}

package logstore

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamcast/streamcast/pkg/schema"
)

// TestStatsBesideAWriteOfTheSameRecord: the statistics run while another
// goroutine (the Parquet writer, in seal and ingest) reads the same
// record's null counts. A sliced record's counts are unknown until first
// read, and arrow-go caches them on that read; run under -race, this test
// fails if statsBeside stops settling them before it starts.
func TestStatsBesideAWriteOfTheSameRecord(t *testing.T) {
	sch, err := schema.Compile([]byte(ingestSchemaDoc))
	if err != nil {
		t.Fatal(err)
	}
	rows := make([][]byte, 200)
	for i := range rows {
		rows[i] = ingestRow(i)
	}
	src := &rowsSource{sch: sch, rows: rows, n: len(rows)}
	data, err := src.Next(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer data.Release()
	// streamcast_offset and streamcast_ts in front, as in a sealed file.
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	defer ib.Release()
	for i := range rows {
		ib.Append(int64(i + 1))
	}
	offs := ib.NewInt64Array()
	defer offs.Release()
	fields := append([]arrow.Field{{Name: "streamcast_offset", Type: arrow.PrimitiveTypes.Int64}, {Name: "streamcast_ts", Type: arrow.PrimitiveTypes.Int64}}, data.Schema().Fields()...)
	cols := append([]arrow.Array{offs, offs}, data.Columns()...)
	whole := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(rows)))
	defer whole.Release()
	rec := whole.NewSlice(1, int64(len(rows)))
	defer rec.Release()

	wait := statsBeside(sch, rec)
	nulls := int64(0)
	for _, c := range rec.Columns() { // what the Parquet writer reads first
		nulls += int64(c.NullN())
	}
	stats, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) == 0 {
		t.Fatal("no statistics computed")
	}
	if nulls == 0 {
		t.Fatal("the record has no nulls, so it cannot show a race on their count")
	}
	if again, err := wait(); err != nil || string(again) != string(stats) {
		t.Fatalf("a second wait gave %q, %v; want the first's", again, err)
	}
}

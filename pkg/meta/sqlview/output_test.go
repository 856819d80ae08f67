package sqlview

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// outputView is a View over two rows with one column of each kind.
func outputView(t *testing.T) *View {
	sch := arrow.NewSchema([]arrow.Field{fOffset, fSym, fPrice, fData, fTags}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{0, 1}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"A,\"x\"", ""}, []bool{true, false})
	b.Field(2).(*array.Float64Builder).AppendValues([]float64{85565, 0.25}, nil)
	b.Field(3).(*array.BinaryBuilder).AppendValues([][]byte{{1, 2}, nil}, []bool{true, false})
	lb := b.Field(4).(*array.ListBuilder)
	lb.Append(true)
	lb.ValueBuilder().(*array.StringBuilder).Append("t")
	lb.AppendNull()
	return openView(t, writeFiles(t, sch, []arrow.RecordBatch{b.NewRecordBatch()}), Options{})
}

func render(t *testing.T, v *View, q string, f Format) string {
	t.Helper()
	rows, err := v.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var buf bytes.Buffer
	if _, err := Write(&buf, rows, f); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestWriteFormats(t *testing.T) {
	v := outputView(t)
	const q = "SELECT streamcast_offset AS o, sym, price, data, tags, price * 2 AS p2 FROM log ORDER BY o"
	for f, want := range map[Format]string{
		FormatNDJSON: `{"o":0,"sym":"A,\"x\"","price":85565.0,"data":"AQI=","tags":["t"],"p2":171130.0}
{"o":1,"sym":null,"price":0.25,"data":null,"tags":null,"p2":0.5}
`,
		FormatJSON: `[{"o":0,"sym":"A,\"x\"","price":85565.0,"data":"AQI=","tags":["t"],"p2":171130.0},
{"o":1,"sym":null,"price":0.25,"data":null,"tags":null,"p2":0.5}]
`,
		FormatCSV: `o,sym,price,data,tags,p2
0,"A,""x""",85565.0,AQI=,"[""t""]",171130.0
1,,0.25,,,0.5
`,
	} {
		if got := render(t, v, q, f); got != want {
			t.Errorf("%s:\n%s\nwant\n%s", f, got, want)
		}
	}
	table := render(t, v, q, FormatTable)
	for _, s := range []string{"│ o │", "sym", "85565.0", "NULL", "(2 rows)"} {
		if !strings.Contains(table, s) {
			t.Errorf("the table lacks %q:\n%s", s, table)
		}
	}
}

func TestWriteParquetReadsBack(t *testing.T) {
	v := outputView(t)
	pq := render(t, v, "SELECT streamcast_offset AS o, sym, price, data, count(*) OVER () AS n, NULL AS blank FROM log ORDER BY o", FormatParquet)
	rf, err := file.NewParquetReader(bytes.NewReader([]byte(pq)))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(rf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	got := tbl.Schema().String()
	for _, s := range []string{"o: type=int64", "sym: type=utf8", "price: type=float64", "data: type=binary", "n: type=int64", "blank: type=utf8"} {
		if !strings.Contains(got, s) {
			t.Errorf("schema lacks %q:\n%s", s, got)
		}
	}
	if tbl.NumRows() != 2 {
		t.Errorf("%d rows, want 2", tbl.NumRows())
	}
}

func TestWriteParquetRefusesMixedTypes(t *testing.T) {
	v := outputView(t)
	rows, err := v.Query(context.Background(), "SELECT CASE WHEN streamcast_offset = 0 THEN 1 ELSE X'00' END AS mixed FROM log ORDER BY streamcast_offset")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	_, err = Write(&bytes.Buffer{}, rows, FormatParquet)
	if err == nil || !strings.Contains(err.Error(), `column "mixed"`) || !strings.Contains(err.Error(), "CAST") {
		t.Fatalf("got %v, want a refusal naming the column and CAST", err)
	}
}

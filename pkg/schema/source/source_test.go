package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/streamcast/streamcast/pkg/schema"
)

// testSchema has a column of every kind a load converts.
const testSchema = `{"type":"object","properties":{
 "id":{"type":"integer"},
 "n32":{"type":"integer","format":"int32"},
 "px":{"type":"number"},
 "f32":{"type":["number","null"],"format":"float"},
 "sym":{"type":"string"},
 "ok":{"type":"boolean"},
 "raw":{"type":["string","null"],"contentEncoding":"base64"},
 "tags":{"type":["array","null"],"items":{"type":"string"}},
 "attrs":{"type":["object","null"],"additionalProperties":{"type":"integer"}},
 "res":{"type":["object","null"],"properties":{"a":{"type":"integer"},"b":{"type":["number","null"]}},"required":["a"]}
},"required":["id","n32","px","sym","ok"]}`

func mustSchema(t testing.TB) *schema.Schema {
	t.Helper()
	sch, err := schema.Compile([]byte(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// canonical returns what publish stores for the JSON row.
func canonical(t testing.TB, sch *schema.Schema, row string) string {
	t.Helper()
	out, err := sch.AppendCanonical(nil, []byte(row))
	if err != nil {
		t.Fatalf("decode %s: %v", row, err)
	}
	return string(out)
}

// readAll reads every batch of inputs and returns each row's canonical
// JSON, as replay would encode it.
func readAll(t testing.TB, sch *schema.Schema, inputs []Input, o Options) ([]string, error) {
	t.Helper()
	r, err := Open(sch, inputs, o)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var rows []string
	for {
		rec, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return rows, err
		}
		if err := checkArrow(sch, rec.Columns()); err != nil {
			t.Fatalf("a batch of the wrong types: %v", err)
		}
		for i := range int(rec.NumRows()) {
			rows = append(rows, string(sch.AppendJSON(nil, rec.Columns(), i)))
		}
		rec.Release()
	}
}

// checkArrow reports whether cols are arrays of sch's declared columns'
// types, in order, as the schema's AppendJSON and filters need.
func checkArrow(sch *schema.Schema, cols []arrow.Array) error {
	fields := sch.Arrow().Fields()
	if len(cols) != len(fields) {
		return fmt.Errorf("%d arrays for %d columns", len(cols), len(fields))
	}
	for k, f := range fields {
		if !arrow.TypeEqual(cols[k].DataType(), f.Type) {
			return fmt.Errorf("column %q is %s in the batch, but the schema says %s", f.Name, cols[k].DataType(), f.Type)
		}
	}
	return nil
}

func writeFile(t testing.TB, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeParquet writes rec as a Parquet file, in row groups of rg rows.
func writeParquet(t testing.TB, rec arrow.RecordBatch, rg int64) string {
	t.Helper()
	return writeParquetWith(t, rec, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(rg)))
}

// writeParquetWith writes rec as a Parquet file with the properties props.
func writeParquetWith(t testing.TB, rec arrow.RecordBatch, props *parquet.WriterProperties) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "src.parquet")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(rec.Schema(), f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeIPC writes rec as an Arrow IPC file or stream.
func writeIPC(t testing.TB, rec arrow.RecordBatch, stream bool) string {
	t.Helper()
	var buf bytes.Buffer
	if stream {
		w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		w.Close()
		return writeFile(t, "src.arrows", buf.String())
	}
	p := filepath.Join(t.TempDir(), "src.arrow")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(rec.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

// fromJSON builds a record of sc from JSON rows (arrow's own reader).
func fromJSON(t testing.TB, sc *arrow.Schema, rows string) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader("["+rows+"]"))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// wideSchema is testSchema's columns in other order and with other,
// losslessly castable types.
func wideSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "sym", Type: arrow.BinaryTypes.LargeString},
		{Name: "id", Type: arrow.PrimitiveTypes.Int32},
		{Name: "n32", Type: arrow.PrimitiveTypes.Int16},
		{Name: "px", Type: arrow.PrimitiveTypes.Float32},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "raw", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "attrs", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "res", Type: arrow.StructOf(arrow.Field{Name: "b", Type: arrow.PrimitiveTypes.Float64, Nullable: true}, arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64}), Nullable: true},
	}, nil)
}

const wideRows = `{"sym":"AAPL","id":1,"n32":-7,"px":1.5,"f32":0.25,"ok":true,"raw":"aGk=","tags":["x","y"],"attrs":[{"key":"k","value":3}],"res":{"a":5,"b":null}},
{"sym":"é","id":2,"n32":7,"px":-0.5,"f32":null,"ok":false,"raw":null,"tags":null,"attrs":null,"res":null}`

// The same rows as publish takes them.
var wideWant = []string{
	`{"id":1,"n32":-7,"px":1.5,"f32":0.25,"sym":"AAPL","ok":true,"raw":"aGk=","tags":["x","y"],"attrs":{"k":3},"res":{"a":5,"b":null}}`,
	`{"id":2,"n32":7,"px":-0.5,"f32":null,"sym":"é","ok":false,"raw":null,"tags":null,"attrs":null,"res":null}`,
}

func TestLosslessCastsLoadAsPublishWouldStoreThem(t *testing.T) {
	sch := mustSchema(t)
	rec := fromJSON(t, wideSchema(), wideRows)
	defer rec.Release()
	for _, tc := range []struct {
		name string
		in   Input
	}{
		{"parquet", Input{writeParquet(t, rec, 1), Parquet}},
		{"arrow file", Input{writeIPC(t, rec, false), ArrowFile}},
		{"arrow stream", Input{writeIPC(t, rec, true), ArrowStream}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(t, sch, []Input{tc.in}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(wideWant) {
				t.Fatalf("got %d rows, want %d", len(got), len(wideWant))
			}
			for i, w := range wideWant {
				if want := canonical(t, sch, w); got[i] != want {
					t.Errorf("row %d:\n got %s\nwant %s", i+1, got[i], want)
				}
			}
		})
	}
}

func TestArrowFileWithoutAnOptionalColumnLoadsItAsNull(t *testing.T) {
	sch := mustSchema(t)
	var fields []arrow.Field
	for _, f := range wideSchema().Fields() {
		if f.Name != "f32" && f.Name != "tags" && f.Name != "res" {
			fields = append(fields, f)
		}
	}
	rec := fromJSON(t, arrow.NewSchema(fields, nil), wideRows)
	defer rec.Release()
	want := []string{
		`{"id":1,"n32":-7,"px":1.5,"sym":"AAPL","ok":true,"raw":"aGk=","attrs":{"k":3}}`,
		`{"id":2,"n32":7,"px":-0.5,"sym":"é","ok":false}`,
	}
	for _, tc := range []struct {
		name string
		in   Input
	}{
		{"parquet", Input{writeParquet(t, rec, 1), Parquet}},
		{"arrow file", Input{writeIPC(t, rec, false), ArrowFile}},
		{"arrow stream", Input{writeIPC(t, rec, true), ArrowStream}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(t, sch, []Input{tc.in}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d rows, want %d", len(got), len(want))
			}
			for i, w := range want {
				if c := canonical(t, sch, w); got[i] != c {
					t.Errorf("row %d:\n got %s\nwant %s", i+1, got[i], c)
				}
			}
		})
	}
}

// wantRefusal asserts err is a *RefusedError naming column, the row (0: none)
// and every word of want.
func wantRefusal(t *testing.T, err error, column string, row int64, want ...string) {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want a refusal of column %q", err, column)
	}
	if re.Column != column || re.Row != row {
		t.Errorf("refused column %q row %d, want column %q row %d: %v", re.Column, re.Row, column, row, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal %q does not say %q", err, w)
		}
	}
}

func TestArrowRefusalsNameTheColumnAndRow(t *testing.T) {
	sch := mustSchema(t)
	base := wideSchema()
	replace := func(name string, f arrow.Field) *arrow.Schema {
		fields := base.Fields()
		for i := range fields {
			if fields[i].Name == name {
				fields[i] = f
			}
		}
		return arrow.NewSchema(fields, nil)
	}
	drop := func(name string) *arrow.Schema {
		var fields []arrow.Field
		for _, f := range base.Fields() {
			if f.Name != name {
				fields = append(fields, f)
			}
		}
		return arrow.NewSchema(fields, nil)
	}
	extra := func(f arrow.Field) *arrow.Schema { return arrow.NewSchema(append(base.Fields(), f), nil) }
	for _, tc := range []struct {
		name   string
		sc     *arrow.Schema
		rows   string
		column string
		row    int64
		want   []string
	}{
		{"float to int", replace("id", arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Float64}), wideRows, "id", 0, []string{"float64", "int64", "without loss"}},
		{"int64 to int32", replace("n32", arrow.Field{Name: "n32", Type: arrow.PrimitiveTypes.Int64}), wideRows, "n32", 0, []string{"int64", "int32"}},
		{"timestamp to int", replace("id", arrow.Field{Name: "id", Type: arrow.FixedWidthTypes.Timestamp_us}), wideRows, "id", 0, []string{"timestamp", "int64"}},
		{"float64 to float32", replace("f32", arrow.Field{Name: "f32", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), wideRows, "f32", 0, []string{"float64", "float32"}},
		{"undeclared column", extra(arrow.Field{Name: "zzz", Type: arrow.PrimitiveTypes.Int64}), wideRows, "zzz", 0, []string{"declares no such column"}},
		{"system column", extra(arrow.Field{Name: "streamcast_offset", Type: arrow.PrimitiveTypes.Int64}), wideRows, "streamcast_offset", 0, []string{"system column"}},
		{"missing column", drop("px"), wideRows, "px", 0, []string{"lacks this declared column", "every row must have"}},
		{"NaN", base, strings.Replace(wideRows, `"px":-0.5`, `"px":"NaN"`, 1), "px", 2, []string{"NaN"}},
		{"Inf in a struct", base, strings.Replace(wideRows, `"res":{"a":5,"b":null}`, `"res":{"a":5,"b":"+Inf"}`, 1), "res.b", 1, []string{"+Inf"}},
		{"null in a non-null column", replace("n32", arrow.Field{Name: "n32", Type: arrow.PrimitiveTypes.Int16, Nullable: true}), strings.Replace(wideRows, `"n32":7`, `"n32":null`, 1), "n32", 2, []string{"not nullable"}},
		{"null in a non-null field", base, strings.Replace(wideRows, `"res":{"a":5,"b":null}`, `"res":{"a":null,"b":null}`, 1), "res.a", 1, []string{"not nullable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := fromJSON(t, tc.sc, tc.rows)
			defer rec.Release()
			if tc.name == "NaN" || strings.HasPrefix(tc.name, "Inf") {
				// arrow's JSON reader spells these as strings; check they arrived.
				if tc.name == "NaN" && !math.IsNaN(float64(rec.Column(3).(*array.Float32).Value(1))) {
					t.Fatal("the test batch holds no NaN")
				}
			}
			for _, in := range []Input{{writeParquet(t, rec, 1), Parquet}, {writeIPC(t, rec, true), ArrowStream}} {
				_, err := readAll(t, sch, []Input{in}, Options{})
				wantRefusal(t, err, tc.column, tc.row, tc.want...)
			}
		})
	}
}

func TestNDJSONGoesThroughPublishsDecoder(t *testing.T) {
	sch := mustSchema(t)
	// An omitted nullable column is null; fields in any order.
	good := writeFile(t, "a.ndjson", `{"sym":"AAPL","id":1,"n32":-7,"px":1.5,"ok":true}`+"\n\n"+`{"id":2,"n32":7,"px":3,"sym":"b","ok":false,"tags":["q"]}`+"\n")
	got, err := readAll(t, sch, []Input{{good, NDJSON}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"id":1,"n32":-7,"px":1.5,"f32":null,"sym":"AAPL","ok":true,"raw":null,"tags":null,"attrs":null,"res":null}`,
		`{"id":2,"n32":7,"px":3.0,"f32":null,"sym":"b","ok":false,"raw":null,"tags":["q"],"attrs":null,"res":null}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	bad := writeFile(t, "b.ndjson", `{"sym":"AAPL","id":1,"n32":-7,"px":1.5,"ok":true}`+"\n\n"+`{"sym":"AAPL","id":1,"n32":-7,"px":1.5,"ok":true,"raw":"!!"}`+"\n")
	_, err = readAll(t, sch, []Input{{bad, NDJSON}}, Options{})
	wantRefusal(t, err, "raw", 2, "line 3", "base64")
}

const csvHeader = "id,n32,px,f32,sym,ok,raw,tags,attrs,res\n"

func TestCSVCellsAreReadByTheirColumnsType(t *testing.T) {
	sch := mustSchema(t)
	src := writeFile(t, "a.csv", csvHeader+
		`1,-7,1.5,0.25,AAPL,true,aGk=,"[""x"",""y""]","{""k"":3}","{""a"":5,""b"":null}"`+"\n"+
		`2,7,-0.5,,é,false,,,,`+"\n")
	got, err := readAll(t, sch, []Input{{src, CSV}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range wideWant {
		if want := canonical(t, sch, w); got[i] != want {
			t.Errorf("row %d:\n got %s\nwant %s", i+1, got[i], want)
		}
	}
	ok := "1,-7,1.5,0.25,AAPL,true,aGk=,,,\n"
	for _, tc := range []struct {
		name, line, column string
		want               []string
	}{
		{"empty in a non-null column", "1,,1.5,,a,true,,,,", "n32", []string{"empty", "not nullable"}},
		{"bad boolean", "1,2,1.5,,a,yes,,,,", "ok", []string{"true or false", `"yes"`}},
		{"bad number", "1,2,1.5x,,a,true,,,,", "px", []string{"not a number"}},
		{"a number smuggling a column", `1,2,"1,""raw"":""aGk=""",,a,true,,,,`, "px", []string{"not a number"}},
		{"fraction in an integer", "1.5,2,1,,a,true,,,,", "id", []string{"integer"}},
		{"int32 out of range", "1,3000000000,1,,a,true,,,,", "n32", []string{"int32"}},
		{"bad base64", "1,2,1,,a,true,%%%,,,", "raw", []string{"base64"}},
		{"bad nested JSON", "1,2,1,,a,true,,[x,,", "tags", []string{"JSON"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := writeFile(t, "b.csv", csvHeader+ok+tc.line+"\n")
			_, err := readAll(t, sch, []Input{{src, CSV}}, Options{})
			wantRefusal(t, err, tc.column, 2, append(tc.want, "line 3")...)
		})
	}
	t.Run("undeclared header", func(t *testing.T) {
		src := writeFile(t, "c.csv", "id,n32,px,sym,ok,zzz\n")
		_, err := readAll(t, sch, []Input{{src, CSV}}, Options{})
		wantRefusal(t, err, "zzz", 0, "does not declare")
	})
	t.Run("missing required header", func(t *testing.T) {
		src := writeFile(t, "c.csv", "id,n32,sym,ok\n")
		_, err := readAll(t, sch, []Input{{src, CSV}}, Options{})
		wantRefusal(t, err, "px", 0, "lacks")
	})
}

func TestSkipRowsCountsAcrossInputs(t *testing.T) {
	sch := mustSchema(t)
	row := func(i int) string {
		return `{"id":` + itoa(i) + `,"n32":1,"px":1,"sym":"s","ok":true}` + "\n"
	}
	var a, b string
	for i := range 5 {
		a += row(i)
		b += row(5 + i)
	}
	rec := func(from, to int) arrow.RecordBatch {
		var rows []string
		for i := from; i < to; i++ {
			rows = append(rows, strings.TrimSpace(row(i)))
		}
		return fromJSON(t, sch.Arrow(), strings.Join(rows, ","))
	}
	ra, rb := rec(0, 5), rec(5, 10)
	defer ra.Release()
	defer rb.Release()
	for _, tc := range []struct {
		name string
		in   []Input
	}{
		{"ndjson", []Input{{writeFile(t, "a.ndjson", a), NDJSON}, {writeFile(t, "b.ndjson", b), NDJSON}}},
		{"parquet", []Input{{writeParquet(t, ra, 2), Parquet}, {writeParquet(t, rb, 2), Parquet}}},
		{"arrow", []Input{{writeIPC(t, ra, false), ArrowFile}, {writeIPC(t, rb, true), ArrowStream}}},
	} {
		for _, skip := range []int64{0, 3, 5, 7, 10, 12} {
			got, err := readAll(t, sch, tc.in, Options{SkipRows: skip})
			if err != nil {
				t.Fatal(err)
			}
			if want := max(0, 10-int(skip)); len(got) != want {
				t.Fatalf("%s skip %d: got %d rows, want %d", tc.name, skip, len(got), want)
			}
			if len(got) > 0 && !strings.HasPrefix(got[0], `{"id":`+itoa(int(skip))+`,`) {
				t.Errorf("%s skip %d: the first row is %s", tc.name, skip, got[0])
			}
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestLocateNamesTheFileAndRowOfAnOrdinal(t *testing.T) {
	sch := mustSchema(t)
	row := `{"id":1,"n32":1,"px":1,"sym":"s","ok":true}` + "\n"
	a := writeFile(t, "a.ndjson", strings.Repeat(row, 5))
	b := writeFile(t, "b.ndjson", strings.Repeat(row, 5))
	r, err := Open(sch, []Input{{a, NDJSON}, {b, NDJSON}}, Options{SkipRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	for pos, want := range map[int64]Location{0: {File: a, Row: 1}, 4: {File: a, Row: 5}, 5: {File: b, Row: 1}, 7: {File: b, Row: 3}} {
		if got := r.Locate(pos); got != want {
			t.Errorf("Locate(%d) = %+v; want %+v", pos, got, want)
		}
	}
}

func TestAStreamWithoutASchemaLoadsNDJSONOnly(t *testing.T) {
	lines := `{"a":1}` + "\n" + `{"b":[true]}` + "\n"
	got, err := readAnyRows(t, []Input{{writeFile(t, "a.ndjson", lines), NDJSON}})
	if err != nil || strings.Join(got, "\n")+"\n" != lines {
		t.Fatalf("got %q, %v; want the lines as they are", got, err)
	}
	if _, err := readAnyRows(t, []Input{{writeFile(t, "b.ndjson", "[1]\n"), NDJSON}}); err == nil {
		t.Error("a line that is no JSON object was taken")
	}
	if _, err := Open(schema.Any(), []Input{{writeFile(t, "c.csv", "a\n1\n"), CSV}}, Options{}); err == nil || !strings.Contains(err.Error(), "NDJSON only") {
		t.Errorf("CSV into a stream without a schema: %v; want a refusal", err)
	}
}

func readAnyRows(t *testing.T, in []Input) ([]string, error) {
	r, err := Open(schema.Any(), in, Options{})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var rows []string
	for {
		rec, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return rows, err
		}
		col := rec.Column(0).(*array.String)
		for i := range col.Len() {
			rows = append(rows, col.Value(i))
		}
		rec.Release()
	}
}

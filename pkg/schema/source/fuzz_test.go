package source

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/streamcast/streamcast/pkg/schema"
)

// fuzzRead reads data as one input of format f and checks what it hands
// out: batches of the declared types whose rows are canonical, that is,
// each row's JSON decodes (as publish would) to the very same bytes (I4).
// A refusal or an error is fine; a panic or a batch that breaks this is
// not.
//
// A format read from a file has data written to file, which the caller
// makes once per fuzz target (the f.Fuzz preamble): a directory made and
// removed per execution cost more than many of the reads.
func fuzzRead(t *testing.T, f Format, file string, data []byte) {
	sch := mustSchema(t)
	in := Input{Path: "-", Format: f}
	o := Options{Stdin: bytes.NewReader(data), BatchRows: 3}
	if !f.streaming() {
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		in.Path = file
	}
	r, err := Open(sch, []Input{in}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var row schema.Row
	for range 1000 {
		rec, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) || err != nil {
			return
		}
		if err := checkArrow(sch, rec.Columns()); err != nil {
			t.Fatalf("a batch of the wrong types: %v", err)
		}
		for i := range int(rec.NumRows()) {
			js := sch.AppendJSON(nil, rec.Columns(), i)
			if err := sch.Decode(&row, js); err != nil {
				t.Fatalf("row %d of a checked batch is refused by publish's decoder: %v\n%s", i, err, js)
			}
			if !bytes.Equal(row.Canonical, js) {
				t.Fatalf("row %d is not canonical:\n got %s\nwant %s", i, js, row.Canonical)
			}
		}
		rec.Release()
	}
}

func FuzzNDJSON(f *testing.F) {
	for _, w := range wideWant {
		f.Add([]byte(w + "\n"))
	}
	f.Add([]byte(`{"id":1,"n32":2,"px":1e3,"sym":"\u00e9","ok":true}` + "\n\n" + `{"id":1}`))
	f.Add([]byte("\n\n  \r\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, NDJSON, "", data) })
}

func FuzzCSV(f *testing.F) {
	f.Add([]byte(csvHeader + `1,-7,1.5,0.25,AAPL,true,aGk=,"[""x""]","{""k"":3}","{""a"":5,""b"":null}"` + "\n"))
	f.Add([]byte(csvHeader + "2,7,-0.5,,é,false,,,,\n"))
	f.Add([]byte("id,n32,px,sym,ok\n1,2,3,\"a,b\",false\n"))
	f.Add([]byte("\ufeffid,n32,px,sym,ok\r\n1,2,1e400,x,true\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, CSV, "", data) })
}

func FuzzArrowStream(f *testing.F) {
	rec := fromJSON(f, wideSchema(), wideRows)
	defer rec.Release()
	b, err := os.ReadFile(writeIPC(f, rec, true))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:len(b)/2])
	// The shapes that made arrow-go allocate from an unverified length
	// and die; ipcverify.go refuses them.
	for _, d := range damagedStreams(f, b) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, ArrowStream, "", data) })
}

func FuzzParquet(f *testing.F) {
	rec := fromJSON(f, wideSchema(), wideRows)
	defer rec.Release()
	b, err := os.ReadFile(writeParquet(f, rec, 1))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[len(b)/3:])
	// A compressed file, so that the pages' decompression is fuzzed too.
	z, err := os.ReadFile(writeParquetWith(f, rec, parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(z)
	file := filepath.Join(f.TempDir(), "src.parquet")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, Parquet, file, data) })
}

package logstore

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamcast/streamcast/pkg/logstore/parquetfile"
	"github.com/streamcast/streamcast/pkg/schema"
)

// TestIngestStatsFromTheWriterEqualComputed: the statistics ingest
// takes from the Parquet writer's bounds are byte for byte those seal
// computes from the rows (Compute), for every flat kind, with
// nulls, an all-null column, zeros of both signs, a NaN, and a value too
// long for Parquet's statistics.
func TestIngestStatsFromTheWriterEqualComputed(t *testing.T) {
	sch, err := schema.Compile([]byte(`{"type":"object","properties":{
	 "i":{"type":"integer"}, "n":{"type":["integer","null"],"format":"int32"},
	 "x":{"type":"number"}, "f":{"type":["number","null"],"format":"float"},
	 "s":{"type":"string"}, "b":{"type":["string","null"],"contentEncoding":"base64"},
	 "ok":{"type":["boolean","null"]}, "none":{"type":["string","null"]}},
	 "required":["i","x","s"]}`))
	if err != nil {
		t.Fatal(err)
	}
	decl := sch.Arrow().Fields()[:len(sch.Columns())]
	fs := arrow.NewSchema(append([]arrow.Field{
		{Name: "streamcast_offset", Type: arrow.PrimitiveTypes.Int64},
		{Name: "streamcast_ts", Type: arrow.PrimitiveTypes.Int64},
	}, decl...), nil)
	long := strings.Repeat("z", 5000)
	groups := map[string][]string{
		"plain": {
			`{"i":5,"n":-3,"x":2.5,"f":1.5,"s":"b","b":"aGk=","ok":true,"none":null}`,
			`{"i":-7,"n":null,"x":-1.25,"f":null,"s":"a","b":null,"ok":false,"none":null}`,
			`{"i":9,"n":11,"x":8,"f":-2,"s":"c","b":"AA==","ok":null,"none":null}`,
		},
		"zeros and a long string": {
			`{"i":0,"n":0,"x":0,"f":-0,"s":"` + long + `","b":"","ok":false,"none":null}`,
			`{"i":1,"n":1,"x":-0,"f":0,"s":"a","b":"AA==","ok":false,"none":null}`,
			`{"i":2,"n":2,"x":3,"f":0,"s":"b","b":null,"ok":false,"none":null}`,
		},
		"a NaN": {
			`{"i":1,"n":1,"x":1,"f":1,"s":"a","b":null,"ok":true,"none":null}`,
			`{"i":2,"n":2,"x":2,"f":2,"s":"b","b":null,"ok":true,"none":null}`,
		},
	}
	for name, rows := range groups {
		t.Run(name, func(t *testing.T) {
			b := array.NewRecordBuilder(memory.DefaultAllocator, fs)
			defer b.Release()
			for k, row := range rows {
				canon, err := sch.AppendCanonical(nil, []byte(row))
				if err != nil {
					t.Fatal(err)
				}
				b.Field(0).(*array.Int64Builder).Append(int64(k))
				b.Field(1).(*array.Int64Builder).Append(int64(k))
				if err := sch.AppendArrow(b.Fields()[2:], canon); err != nil {
					t.Fatal(err)
				}
			}
			rec := b.NewRecordBatch()
			defer rec.Release()
			if name == "a NaN" {
				// JSON holds no NaN; a foreign file's float column might.
				x := rec.Column(4).(*array.Float64).Float64Values()
				x[1] = math.NaN()
			}
			w, err := parquetfile.CreateConcurrent(filepath.Join(t.TempDir(), "f.parquet"), fs, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			if err := w.WriteGroup(rec); err != nil {
				t.Fatal(err)
			}
			got, err := groupStats(sch, rec, w)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Compute(sch, rec.Columns()[2:])
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("from the writer:\n%s\ncomputed:\n%s", got, want)
			}
		})
	}
}

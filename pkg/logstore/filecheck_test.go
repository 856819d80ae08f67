package logstore_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/parquetfile"
)

// footer writes a data file whose row groups hold the offsets groups (each
// a list, in row order) and returns its footer.
func footer(t testing.TB, groups ...[]int64) *metadata.FileMetaData {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: logstore.OffsetColumn, Type: arrow.PrimitiveTypes.Int64},
		{Name: logstore.TSColumn, Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	p := filepath.Join(t.TempDir(), "f.parquet")
	w, err := parquetfile.Create(p, sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, offs := range groups {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		b.Field(0).(*array.Int64Builder).AppendValues(offs, nil)
		b.Field(1).(*array.Int64Builder).AppendValues(offs, nil)
		rec := b.NewRecordBatch()
		b.Release()
		if err := w.WriteGroup(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	pq, err := parquetfile.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	return pq.MetaData()
}

func offsets(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

func TestCheckFooterRefusesAFileThatHoldsOtherOffsetsThanItsRecord(t *testing.T) {
	for _, c := range []struct {
		name             string
		groups           [][]int64
		start, end, rows int64
		want             string // "" for a file that passes
	}{
		{"as recorded", [][]int64{offsets(1, 5), offsets(5, 9)}, 1, 9, 8, ""},
		{"as recorded, count not kept", [][]int64{offsets(1, 9)}, 1, 9, 0, ""},
		{"another file of the table in its place", [][]int64{offsets(9, 17)}, 1, 9, 8, "row group 0 holds offsets [9,16] in 8 rows where [1,…) was expected"},
		{"a gap between row groups", [][]int64{offsets(1, 4), offsets(5, 9)}, 1, 9, 8, "row group 1 holds offsets [5,8] in 4 rows where [4,…) was expected"},
		{"a row group missing an offset", [][]int64{{1, 2, 4}}, 1, 5, 4, "row group 0 holds offsets [1,4] in 3 rows where [1,…) was expected"},
		{"ends short of its record", [][]int64{offsets(1, 7)}, 1, 9, 8, "it holds offsets [1,7) in 6 rows where [1,9) was recorded"},
		{"another count than its record", [][]int64{offsets(1, 9)}, 1, 9, 7, "it holds offsets [1,9) in 8 rows where [1,9) was recorded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			spans, err := logstore.CheckFooter(footer(t, c.groups...), c.start, c.end, c.rows)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused a file as recorded: %v", err)
			case c.want == "" && len(spans) != len(c.groups):
				t.Fatalf("returned %d row group ranges for %d row groups", len(spans), len(c.groups))
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

func TestCheckRowOffsetsRefusesRowsTheFooterDoesNotDescribe(t *testing.T) {
	g := logstore.Span{Start: 10, End: 14}
	for _, c := range []struct {
		name string
		vals []int64
		perm []int32
		want string
	}{
		{"in order", []int64{10, 11, 12, 13}, nil, ""},
		{"in sort_by order", []int64{12, 10, 13, 11}, []int32{1, 3, 0, 2}, ""},
		{"an offset twice", []int64{10, 11, 11, 13}, nil, "offset 11 is outside its row group's range [10,14) or appears twice"},
		{"an offset outside", []int64{10, 11, 12, 14}, nil, "offset 14 is outside"},
		{"a row short", []int64{10, 11, 12}, nil, "it holds 3 rows where its footer says 4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			perm, err := logstore.CheckRowOffsets(c.vals, g)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("got %v, want an error saying %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(perm) != len(c.perm) {
				t.Fatalf("perm %v, want %v", perm, c.perm)
			}
			for i := range perm {
				if perm[i] != c.perm[i] {
					t.Fatalf("perm %v, want %v", perm, c.perm)
				}
			}
		})
	}
}

// BenchmarkCheckFooter is what the check costs a reader per data file, of
// the sizes a small table has (one row group of 500 rows) and a large one
// (eight of 131,072): the footer walk and one pass over the offsets.
func BenchmarkCheckFooter(b *testing.B) {
	for _, c := range []struct {
		name         string
		groups, rows int64
	}{{"500rows", 1, 500}, {"8x131072rows", 8, 131072}} {
		b.Run(c.name, func(b *testing.B) {
			var groups [][]int64
			for g := range c.groups {
				groups = append(groups, offsets(1+g*c.rows, 1+(g+1)*c.rows))
			}
			md := footer(b, groups...)
			end := 1 + c.groups*c.rows
			b.ResetTimer()
			for range b.N {
				spans, err := logstore.CheckFooter(md, 1, end, end-1)
				if err != nil {
					b.Fatal(err)
				}
				for i, s := range spans {
					if _, err := logstore.CheckRowOffsets(groups[i], s); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(end-1), "ns/row")
		})
	}
}

package sqlview

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/streamcast/streamcast/pkg/meta/history"
)

// fileTable is a Table over real Parquet files, one per "file" of a log,
// in offset order. Like the history reader it prunes by statistics (the
// min and max of each column, taken when the file is written) and counts
// what it opened and skipped, so tests can show pruning happens; it never
// drops a row for failing a bound.
type fileTable struct {
	schema *arrow.Schema
	files  []testFile

	mu       sync.Mutex
	opened   int
	skipped  int
	requests []history.ScanRequest
	failAt   int // > 0: the scan's reader fails after this many batches

	batchSize int64 // rows per batch read; small by default, to cross batch edges often
}

type testFile struct {
	path  string
	rows  int
	stats map[string][2]any // column → min, max of its non-null values
}

var errInjected = errors.New("injected read failure")

// writeFiles writes each record as its own Parquet file under dir and
// returns the Table over them; schema is the table's (unioned) schema, and
// a record may lack some of its columns.
func writeFiles(t testing.TB, schema *arrow.Schema, recs []arrow.RecordBatch) *fileTable {
	t.Helper()
	dir := t.TempDir()
	ft := &fileTable{schema: schema}
	for i, rec := range recs {
		path := filepath.Join(dir, fmt.Sprintf("%05d.parquet", i))
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w, err := pqarrow.NewFileWriter(rec.Schema(), f, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		ft.files = append(ft.files, testFile{path: path, rows: int(rec.NumRows()), stats: statsOf(rec)})
	}
	return ft
}

func (ft *fileTable) Schema() *arrow.Schema { return ft.schema }

func (ft *fileTable) counts() (opened, skipped int) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.opened, ft.skipped
}

func (ft *fileTable) reset() {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.opened, ft.skipped, ft.requests = 0, 0, nil
}

func (ft *fileTable) Scan(ctx context.Context, req history.ScanRequest) (array.RecordReader, error) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.requests = append(ft.requests, req)
	var keep []testFile
	for _, f := range ft.files {
		if mayHold(f.stats, req.Bounds) {
			keep = append(keep, f)
			ft.opened++
		} else {
			ft.skipped++
		}
	}
	bs := ft.batchSize
	if bs == 0 {
		bs = 16
	}
	return &filesReader{ctx: ctx, schema: ft.schema, files: keep, columns: req.Columns, failAt: ft.failAt, batchSize: bs}, nil
}

// mayHold reports whether a file whose columns span stats may hold a row
// meeting every bound. A column the file lacks is all null, and null meets
// no comparison.
func mayHold(stats map[string][2]any, bounds []history.Bound) bool {
	for _, b := range bounds {
		mm, ok := stats[b.Column]
		if !ok {
			return false
		}
		any := false
		for _, v := range b.Values {
			if boundMayHold(b.Op, v, mm[0], mm[1]) {
				any = true
			}
		}
		if !any {
			return false
		}
	}
	return true
}

func boundMayHold(op history.Op, v, lo, hi any) bool {
	c := func(a, b any) int { return compareAny(a, b) }
	switch op {
	case history.OpEq, history.OpIn:
		return c(v, lo) >= 0 && c(v, hi) <= 0
	case history.OpLt:
		return c(lo, v) < 0
	case history.OpLe:
		return c(lo, v) <= 0
	case history.OpGt:
		return c(hi, v) > 0
	case history.OpGe:
		return c(hi, v) >= 0
	}
	return true
}

// compareAny compares two values of one Bound type; a type it does not
// expect panics, which fails the test that passed it.
func compareAny(a, b any) int {
	switch x := a.(type) {
	case int64:
		return cmp.Compare(x, b.(int64))
	case float64:
		return cmp.Compare(x, b.(float64))
	case string:
		return cmp.Compare(x, b.(string))
	case []byte:
		return bytes.Compare(x, b.([]byte))
	}
	panic(fmt.Sprintf("compareAny: %T", a))
}

// statsOf is each column's min and max over its non-null values; a
// column with none has no entry (a file of nulls in it holds no match).
func statsOf(rec arrow.RecordBatch) map[string][2]any {
	out := map[string][2]any{}
	for k, f := range rec.Schema().Fields() {
		arr := rec.Column(k)
		var lo, hi any
		for i := 0; i < arr.Len(); i++ {
			if arr.IsNull(i) {
				continue
			}
			var v any
			switch a := arr.(type) {
			case *array.Int64:
				v = a.Value(i)
			case *array.Float64:
				v = a.Value(i)
			case *array.String:
				v = a.Value(i)
			case *array.Binary:
				v = a.Value(i)
			default:
				continue
			}
			if lo == nil || compareAny(v, lo) < 0 {
				lo = v
			}
			if hi == nil || compareAny(v, hi) > 0 {
				hi = v
			}
		}
		if lo != nil {
			out[f.Name] = [2]any{lo, hi}
		}
	}
	return out
}

// filesReader reads the kept files one after another, projected to the
// requested columns, as the history reader does.
type filesReader struct {
	ctx       context.Context
	schema    *arrow.Schema
	files     []testFile
	columns   []string
	failAt    int
	batches   int
	batchSize int64

	cur  pqarrow.RecordReader
	rf   *file.Reader
	rec  arrow.RecordBatch
	err  error
	refs int64
}

func (r *filesReader) Retain()               { r.refs++ }
func (r *filesReader) Release()              { r.closeFile() }
func (r *filesReader) Schema() *arrow.Schema { return r.schema }
func (r *filesReader) Err() error            { return r.err }

func (r *filesReader) RecordBatch() arrow.RecordBatch { return r.rec }

func (r *filesReader) Record() arrow.RecordBatch { return r.rec }

func (r *filesReader) Next() bool {
	r.rec = nil
	if r.err != nil {
		return false
	}
	if r.failAt > 0 && r.batches >= r.failAt {
		r.err = errInjected
		return false
	}
	for {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			return false
		}
		if r.cur != nil && r.cur.Next() {
			r.rec = r.cur.RecordBatch()
			r.batches++
			return true
		}
		if r.cur != nil && r.cur.Err() != nil {
			r.err = r.cur.Err()
			return false
		}
		r.closeFile()
		if len(r.files) == 0 {
			return false
		}
		if err := r.openFile(r.files[0]); err != nil {
			r.err = err
			return false
		}
		r.files = r.files[1:]
	}
}

func (r *filesReader) openFile(f testFile) error {
	rf, err := file.OpenParquetFile(f.path, false)
	if err != nil {
		return err
	}
	fr, err := pqarrow.NewFileReader(rf, pqarrow.ArrowReadProperties{BatchSize: r.batchSize}, memory.DefaultAllocator)
	if err != nil {
		rf.Close()
		return err
	}
	var idx []int // Parquet leaf columns of the requested top-level columns
	if r.columns != nil {
		want := map[string]bool{}
		for _, name := range r.columns {
			want[name] = true
		}
		sch := rf.MetaData().Schema
		for i := 0; i < sch.NumColumns(); i++ {
			if want[sch.Column(i).ColumnPath()[0]] {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			// None of the columns asked for: the rows still count.
			idx = []int{0}
		}
	}
	rr, err := fr.GetRecordReader(r.ctx, idx, nil)
	if err != nil {
		rf.Close()
		return err
	}
	r.rf, r.cur = rf, rr
	return nil
}

func (r *filesReader) closeFile() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.rf != nil {
		r.rf.Close()
		r.rf = nil
	}
}

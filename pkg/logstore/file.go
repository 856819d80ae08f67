package logstore

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/streamcast/streamcast/pkg/schema"
)

// fileRec is a completed file as buffer.db records it.
type fileRec struct {
	start, end int64 // offsets [start, end)
	name       string
	rows       int64
	stats      string // JSON {"column": [min, max]}
}

// mayMatch reports whether the file may hold a row matching f, by its
// recorded column min/max.
func (fr fileRec) mayMatch(f *schema.Filter) bool {
	if f == nil || f.All() {
		return true
	}
	var stats map[string][2]json.RawMessage
	if err := json.Unmarshal([]byte(fr.stats), &stats); err != nil {
		return true // unsure: read the file
	}
	return f.MayMatch(func(col string) (min, max []byte, ok bool) {
		mm, ok := stats[col]
		if !ok {
			return nil, nil, false
		}
		return mm[0], mm[1], true
	})
}

// fileData is a sealed file read into memory and checked against its
// record. Its rows may be in sort_by order; perm maps offsets to rows.
type fileData struct {
	rec   arrow.RecordBatch
	start int64
	perm  []int32 // perm[off-start] is the row of off; nil when rows are in offset order
	ts    []int64
	decl  []arrow.Array // declared columns (or the row column), file order
}

// row returns the record row that holds offset off.
func (d *fileData) row(off int64) int {
	if d.perm == nil {
		return int(off - d.start)
	}
	return int(d.perm[off-d.start])
}

func (d *fileData) release() {
	if d.rec != nil {
		d.rec.Release()
		d.rec = nil
	}
}

// readFile reads a completed file whole and checks that it holds exactly
// the offsets its record says, once each. Any failure is an error naming
// the file and wrapping ErrCorrupt; none of its bytes are served then.
func (l *Log) readFile(ctx context.Context, fr fileRec) (*fileData, error) {
	path := filepath.Join(l.dir, filesDir, fr.name)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("sealed file %s (offsets [%d,%d)) is unreadable: %s: %w", path, fr.start, fr.end, fmt.Sprintf(format, args...), ErrCorrupt)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, bad("%v", err)
	}
	defer f.Close()
	rdr, err := file.NewParquetReader(f)
	if err != nil {
		return nil, bad("%v", err)
	}
	defer rdr.Close()
	fr2, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{BatchSize: max(fr.rows, 1)}, memory.DefaultAllocator)
	if err != nil {
		return nil, bad("%v", err)
	}
	tbl, err := readTable(ctx, fr2)
	if err != nil {
		return nil, bad("%v", err)
	}
	defer tbl.Release()
	if err := sameSchema(tbl.Schema(), l.fileSc); err != nil {
		return nil, bad("%v", err)
	}
	n := fr.end - fr.start
	if tbl.NumRows() != n || fr.rows != n {
		return nil, bad("it holds %d rows where %d were recorded", tbl.NumRows(), n)
	}
	cols := make([]arrow.Array, tbl.NumCols())
	for i := range cols {
		ch := tbl.Column(i).Data()
		if len(ch.Chunks()) == 1 {
			cols[i] = ch.Chunk(0)
			cols[i].Retain()
			continue
		}
		cols[i], err = array.Concatenate(ch.Chunks(), memory.DefaultAllocator)
		if err != nil {
			for _, c := range cols[:i] {
				c.Release()
			}
			return nil, bad("%v", err)
		}
	}
	rec := array.NewRecordBatch(l.fileSc, cols, n)
	for _, c := range cols {
		c.Release()
	}
	d := &fileData{rec: rec, start: fr.start}
	offs, ok := rec.Column(0).(*array.Int64)
	tsc, ok2 := rec.Column(1).(*array.Int64)
	if !ok || !ok2 || offs.NullN() > 0 || tsc.NullN() > 0 {
		d.release()
		return nil, bad("its %s or %s column is missing or holds nulls", OffsetColumn, TSColumn)
	}
	d.ts = tsc.Int64Values()
	d.decl = rec.Columns()[2:]
	vals := offs.Int64Values()
	inOrder := true
	for i, v := range vals {
		if v != fr.start+int64(i) {
			inOrder = false
			break
		}
	}
	if !inOrder {
		d.perm = make([]int32, n)
		seen := make([]bool, n)
		for i, v := range vals {
			k := v - fr.start
			if k < 0 || k >= n || seen[k] {
				d.release()
				return nil, bad("offset %d is outside its range or appears twice", v)
			}
			seen[k] = true
			d.perm[k] = int32(i)
		}
	}
	return d, nil
}

func readTable(ctx context.Context, fr *pqarrow.FileReader) (tbl arrow.Table, err error) {
	// A damaged file can trip a panic deep in a decoder; it must surface
	// as an error naming the file, never take the process down.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoding failed: %v", r)
		}
	}()
	return fr.ReadTable(ctx)
}

// sameSchema checks that a file's columns are the ones the log expects.
func sameSchema(got, want *arrow.Schema) error {
	if got.NumFields() != want.NumFields() {
		return fmt.Errorf("it has %d columns where %d were expected", got.NumFields(), want.NumFields())
	}
	for i := range want.NumFields() {
		g, w := got.Field(i), want.Field(i)
		if g.Name != w.Name || !arrow.TypeEqual(g.Type, w.Type) {
			return fmt.Errorf("column %d is %s %s where %s %s was expected", i, g.Name, g.Type, w.Name, w.Type)
		}
	}
	return nil
}

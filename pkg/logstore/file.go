package logstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/streamcast/streamcast/pkg/logstore/parquetfile"
	"github.com/streamcast/streamcast/pkg/schema"
)

// fileRec is a data file as buffer.db records it: a local file (files) or
// a data file of the published table (published).
type fileRec struct {
	start, end int64 // offsets [start, end)
	name       string
	rows       int64
	stats      string // JSON, as Compute encodes it
	published  bool   // a data file of the published table, at path
	path       string // its location in the table (published files only)
}

// where names the file for messages: its local path or its location.
func (fr fileRec) where(l *Log) string {
	if fr.published {
		return fr.path
	}
	return filepath.Join(l.dir, FilesDir, fr.name)
}

// mayMatch reports whether the file may hold a row matching f, by its
// recorded column min/max.
func (fr fileRec) mayMatch(f *schema.Filter) bool {
	if f == nil || f.All() {
		return true
	}
	stats, err := Decode([]byte(fr.stats))
	if err != nil {
		return true // unsure: read the file
	}
	return f.MayMatch(func(col string) (min, max []byte, ok bool) {
		st, _ := stats.Column(col)
		return st.Min, st.Max, st.HasBounds()
	})
}

// fileData is one row group of a data file read into memory and checked.
// A row group holds a contiguous offset range; its rows may be in sort_by
// order, and perm maps offsets to rows.
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

// ErrFileGone reports a data file that is no longer where its record said
// when the file list was read: maintenance moved its rows to another tier
// or file since. A scan reloads the records and tries again; a merge
// (EachRowGroup) gives up and plans afresh.
var ErrFileGone = errors.New("data file is gone")

// dataFile is an open data file whose footer has been checked against its
// record.
type dataFile struct {
	fr     fileRec
	src    *parquetfile.Source
	closer io.Closer
	pq     *file.Reader
	groups []Span // each row group's offsets, from its checked footer
}

func (df *dataFile) close() {
	if df.pq != nil {
		_ = df.pq.Close() // its source, a parquetfile.Source, is no io.Closer: closed below
	}
	if df.closer != nil {
		_ = df.closer.Close()
	}
}

// openData opens a data file and checks its footer against its record
// (CheckFooter): row groups tile the recorded range, each a contiguous
// offset range. A file that is not there returns ErrFileGone; one that
// disagrees with its record an error wrapping ErrCorrupt; a published
// file that cannot be fetched the I/O error.
func (l *Log) openData(ctx context.Context, fr fileRec) (_ *dataFile, err error) {
	where := fr.where(l)
	df := &dataFile{fr: fr}
	defer func() {
		if err != nil {
			df.close()
		}
	}()
	var r interface {
		io.ReaderAt
		io.Seeker
		io.Closer
	}
	if fr.published {
		pt, err := l.published()
		if err != nil {
			return nil, err
		}
		r, err = pt.OpenFile(fr.path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("published file %s: %w", where, ErrFileGone)
			}
			return nil, fmt.Errorf("open published file %s (offsets [%d,%d)): %w", where, fr.start, fr.end, err)
		}
	} else {
		f, err := os.Open(where)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("file %s: %w", where, ErrFileGone)
			}
			return nil, l.corrupt(fr, "%v", err)
		}
		r = f
	}
	df.closer = r
	df.src = parquetfile.NewSource(r)
	pq, err := parquetfile.NewReader(df.src)
	if err != nil {
		return nil, l.readErr(df, "%v", err)
	}
	df.pq = pq
	if df.groups, err = CheckFooter(pq.MetaData(), fr.start, fr.end, fr.rows); err != nil {
		return nil, l.readErr(df, "%v", err)
	}
	return df, nil
}

// corrupt returns the error for a file whose bytes cannot be trusted.
func (l *Log) corrupt(fr fileRec, format string, args ...any) error {
	kind := "file"
	if fr.published {
		kind = "published file"
	}
	return fmt.Errorf("%s %s (offsets [%d,%d)) is unreadable: %s: %w", kind, fr.where(l), fr.start, fr.end, fmt.Sprintf(format, args...), ErrCorrupt)
}

// readErr is corrupt, unless fetching the bytes failed: then the error is
// the I/O failure, which a later read may not meet.
func (l *Log) readErr(df *dataFile, format string, args ...any) error {
	if df.fr.published && df.src != nil && df.src.Err() != nil {
		return fmt.Errorf("read %s (offsets [%d,%d)): %w", df.fr.where(l), df.fr.start, df.fr.end, df.src.Err())
	}
	return l.corrupt(df.fr, format, args...)
}

// eachGroup reads the row groups of fr that hold offsets in [lo, hi) and
// calls fn with each, checked: it holds exactly the offsets of its range,
// once each, and the columns the log expects. Nothing of a row group that
// fails a check is passed to fn.
func (l *Log) eachGroup(ctx context.Context, fr fileRec, lo, hi int64, fn func(d *fileData, lo, hi int64) error) error {
	df, err := l.openData(ctx, fr)
	if err != nil {
		return err
	}
	defer df.close()
	var maxRows int64
	for _, g := range df.groups {
		maxRows = max(maxRows, g.End-g.Start)
	}
	ar, err := pqarrow.NewFileReader(df.pq, pqarrow.ArrowReadProperties{BatchSize: max(maxRows, 1)}, memory.DefaultAllocator)
	if err != nil {
		return l.readErr(df, "%v", err)
	}
	for i, g := range df.groups {
		if g.End <= lo || g.Start >= hi {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if fr.published {
			df.src.Prefetch(parquetfile.GroupSpan(df.pq.MetaData().RowGroup(i)))
		}
		d, err := l.readGroup(ctx, df, ar, i)
		if err != nil {
			return err
		}
		err = fn(d, max(lo, g.Start), min(hi, g.End))
		d.release()
		if err != nil {
			return err
		}
	}
	return nil
}

// readGroup reads row group i of an open file and checks it.
func (l *Log) readGroup(ctx context.Context, df *dataFile, ar *pqarrow.FileReader, i int) (*fileData, error) {
	g := df.groups[i]
	tbl, err := parquetfile.ReadRowGroup(ctx, ar, i)
	if err != nil {
		return nil, l.readErr(df, "row group %d: %v", i, err)
	}
	defer tbl.Release()
	if err := parquetfile.SameSchema(tbl.Schema(), l.fileSc); err != nil {
		return nil, l.corrupt(df.fr, "%v", err)
	}
	n := g.End - g.Start
	if tbl.NumRows() != n {
		return nil, l.corrupt(df.fr, "row group %d holds %d rows where its footer says %d", i, tbl.NumRows(), n)
	}
	cols := make([]arrow.Array, tbl.NumCols())
	for c := range cols {
		ch := tbl.Column(c).Data()
		if len(ch.Chunks()) == 1 {
			cols[c] = ch.Chunk(0)
			cols[c].Retain()
			continue
		}
		cols[c], err = array.Concatenate(ch.Chunks(), memory.DefaultAllocator)
		if err != nil {
			for _, a := range cols[:c] {
				a.Release()
			}
			return nil, l.corrupt(df.fr, "%v", err)
		}
	}
	rec := array.NewRecordBatch(l.fileSc, cols, n)
	for _, c := range cols {
		c.Release()
	}
	d := &fileData{rec: rec, start: g.Start}
	offs, ok := rec.Column(0).(*array.Int64)
	tsc, ok2 := rec.Column(1).(*array.Int64)
	if !ok || !ok2 || offs.NullN() > 0 || tsc.NullN() > 0 {
		d.release()
		return nil, l.corrupt(df.fr, "its %s or %s column is missing or holds nulls", OffsetColumn, TSColumn)
	}
	d.ts = tsc.Int64Values()
	d.decl = rec.Columns()[2:]
	if d.perm, err = CheckRowOffsets(offs.Int64Values(), g); err != nil {
		d.release()
		return nil, l.corrupt(df.fr, "row group %d: %v", i, err)
	}
	return d, nil
}

// EachRowGroup reads the local file name, recorded as offsets [start, end)
// in rows rows, and calls fn with each of its row groups in offset order,
// checked as a scan checks them (I4). A file that is gone returns an error
// wrapping ErrFileGone; rec is released when fn returns.
func (l *Log) EachRowGroup(ctx context.Context, name string, start, end, rows int64, fn func(rec arrow.RecordBatch) error) error {
	fr := fileRec{start: start, end: end, name: name, rows: rows}
	return l.eachGroup(ctx, fr, start, end, func(d *fileData, _, _ int64) error { return fn(d.rec) })
}

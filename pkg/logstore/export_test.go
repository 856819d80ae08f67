package logstore

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamcast/streamcast/pkg/logstore/parquetfile"
)

// runRole runs the maintenance role named role over dirs until ctx ends,
// as `streamcast maintain` runs it.
func runRole(ctx context.Context, role string, dirs []string, o MaintainOptions) error {
	return Maintain(ctx, Role(role), dirs, o)
}

// logRoleNames are the roles that work on a log alone, in serve's order:
// every role but retain, whose pass is the stream's (pkg/meta).
func logRoleNames() []string {
	return slices.DeleteFunc(RoleNames(), func(r string) bool { return r == string(RoleRetain) })
}

// Evict is Clean's first step alone: it deletes buffered groups that
// completed files hold and returns the number of rows deleted. It runs
// under clean.lock: when another process is cleaning this log it returns
// an error wrapping ErrBusy.
func (l *Log) Evict(ctx context.Context) (evicted int64, err error) {
	end, err := begin(l, "evict log", RoleClean)
	if err != nil {
		return 0, err
	}
	defer end()
	return evictBuffer(ctx, l)
}

// ScanArrow calls fn with Arrow records holding the rows in [from, to) in
// offset order: streamcast_offset, streamcast_ts, then the declared columns
// (a stream without a schema has one string column, streamcast_row). A
// record is valid only during the call; Retain it to keep it.
func (l *Log) ScanArrow(ctx context.Context, from, to int64, fn func(rec arrow.Record) error) error {
	const batchRows = 64 << 10
	bld := array.NewRecordBuilder(memory.DefaultAllocator, l.fileSc)
	defer bld.Release()
	offB := bld.Field(0).(*array.Int64Builder)
	tsB := bld.Field(1).(*array.Int64Builder)
	decl := bld.Fields()[2:]
	pending := 0
	flush := func() error {
		if pending == 0 {
			return nil
		}
		pending = 0
		rec := bld.NewRecordBatch()
		defer rec.Release()
		return fn(rec)
	}
	onFile := func(fr fileRec, d *fileData, lo, hi int64) error {
		if err := flush(); err != nil {
			return err
		}
		var rec arrow.RecordBatch
		if d.perm == nil {
			rec = d.rec.NewSlice(lo-d.start, hi-d.start)
		} else {
			var err error
			rec, err = parquetfile.Take(d.rec, d.perm[lo-d.start:hi-d.start])
			if err != nil {
				return fmt.Errorf("reorder %s: %w", fr.name, err)
			}
		}
		defer rec.Release()
		return fn(rec)
	}
	onGroup := func(g *bufGroup, lo, hi int64) error {
		u := NewReader(g.rows)
		for off := g.first; off < hi; off++ {
			row, ok, err := u.Next()
			if err != nil || !ok {
				return fmt.Errorf("buffer group at offset %d ends before offset %d: %w", g.first, off, ErrCorrupt)
			}
			if off < lo {
				continue
			}
			offB.Append(off)
			tsB.Append(g.ts)
			if l.sch.IsAny() {
				decl[0].(*array.StringBuilder).BinaryBuilder.Append(row)
			} else if err := l.sch.AppendArrow(decl, row); err != nil {
				return fmt.Errorf("buffered row at offset %d does not convert to Arrow: %w: %w", off, err, ErrCorrupt)
			}
			pending++
			if pending >= batchRows {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := l.walk(ctx, from, to, nil, onFile, onGroup); err != nil {
		return err
	}
	return flush()
}

// OpenConns reports how many SQLite connections the handle holds open
// now, the write connection included: what WithIdleClose lets go.
func (l *Log) OpenConns() int {
	n := l.rdb.Stats().OpenConnections
	if l.wdb != nil {
		n += l.wdb.Stats().OpenConnections
	}
	return n
}

// setOverride applies policy overrides to an open handle, as WithOverride
// does at open, for tests that change them between steps.
func (l *Log) setOverride(o Config) {
	l.polMu.Lock()
	l.pol = l.cfg.Override(o)
	l.polMu.Unlock()
}

// fileRange is a local or published file's record, as the tests read it.
type fileRange struct {
	start, end int64
	name, path string
	rows       int64
	fileBytes  int64
}

// recordedFiles reads the records of table (files or published) in offset
// order.
func recordedFiles(t testing.TB, l *Log, table string) []fileRange {
	t.Helper()
	col := "''"
	if table == "published" {
		col = "path"
	}
	rows, err := l.rdb.QueryContext(context.Background(), `SELECT start_offset, end_offset, name, `+col+`, row_count, file_bytes FROM `+table+` ORDER BY start_offset`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []fileRange
	for rows.Next() {
		var f fileRange
		if err := rows.Scan(&f.start, &f.end, &f.name, &f.path, &f.rows, &f.fileBytes); err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

package logstore

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamcast/streamcast/pkg/logstore/parquetfile"
)

// Buffered is buffered rows read for sealing: whole commit groups
// [Start, End), converted to one Arrow record in the file schema, ordered
// by sort_by (then offset).
type Buffered struct {
	Start, End   int64
	JSONBytes    int64 // the canonical bytes of the rows
	MinTS, MaxTS int64 // the smallest and largest streamcast_ts
	Rec          arrow.RecordBatch
}

type bufGroup struct {
	first, n, ts int64
	rows         []byte // packed
}

// ReadBuffered reads whole groups from start until their estimated Arrow
// size (ratio Arrow bytes per canonical byte) reaches TargetSealBytes, and
// converts them. ok=false means there is nothing to seal: an empty buffer,
// or (without flush) less than a target. The caller releases b.Rec.
func (l *Log) ReadBuffered(ctx context.Context, start int64, ratio float64, flush bool) (b Buffered, ok bool, err error) {
	var groups []bufGroup
	hs, err := readHoles(ctx, l.rdb)
	if err != nil {
		return b, false, fmt.Errorf("read holes: %w", err)
	}
	if h, ok := holeAt(hs, start); ok {
		start = h.End // a file never spans a hole: start after it
	}
	b.Start = start
	target := l.cfg.TargetSealBytes
	// One statement, so one snapshot of the buffer.
	rows, err := l.rdb.QueryContext(ctx, `SELECT first, n, ts, rows FROM groups WHERE first >= ? ORDER BY first`, start)
	if err != nil {
		return b, false, fmt.Errorf("read buffer: %w", err)
	}
	defer rows.Close()
	expect := start
	var est float64
	full := false
	for rows.Next() {
		var g bufGroup
		if err := rows.Scan(&g.first, &g.n, &g.ts, &g.rows); err != nil {
			return b, false, fmt.Errorf("read buffer: %w", err)
		}
		if g.first != expect && len(groups) > 0 && holeSpans(hs, expect, g.first) {
			// Cut the file at the hole now, without waiting for a
			// target: the rows after it go into the next file.
			full = true
			break
		}
		if g.first != expect {
			return b, false, fmt.Errorf("the buffer holds offset %d where %d was expected (files end at %d): %w", g.first, expect, start, ErrCorrupt)
		}
		expect += g.n
		groups = append(groups, g)
		b.JSONBytes += int64(len(g.rows))
		est += float64(len(g.rows))*ratio + 16*float64(g.n)
		if est >= float64(target) {
			full = true
			break
		}
	}
	if err := rows.Err(); err != nil {
		return b, false, fmt.Errorf("read buffer: %w", err)
	}
	b.End = expect
	if len(groups) == 0 || (!full && !flush) {
		return b, false, nil
	}
	rows.Close()
	b.MinTS, b.MaxTS = tsRange(groups)
	if b.Rec, err = l.buildRecord(b.Start, b.End, groups); err != nil {
		return b, false, err
	}
	return b, true, nil
}

// buildRecord converts the canonical rows of groups, [start, end), into
// one Arrow record with the file schema, ordered by sort_by (then offset).
func (l *Log) buildRecord(start, end int64, groups []bufGroup) (arrow.RecordBatch, error) {
	mem := memory.DefaultAllocator
	bld := array.NewRecordBuilder(mem, l.fileSc)
	defer bld.Release()
	n := int(end - start)
	bld.Reserve(n)
	offB := bld.Field(0).(*array.Int64Builder)
	tsB := bld.Field(1).(*array.Int64Builder)
	decl := bld.Fields()[2:]
	var rowB *array.StringBuilder
	if l.sch.IsAny() {
		rowB = decl[0].(*array.StringBuilder)
	}
	for _, g := range groups {
		u := NewReader(g.rows)
		off := g.first
		for {
			row, ok, err := u.Next()
			if err != nil {
				return nil, fmt.Errorf("buffer group at offset %d: %w: %w", g.first, err, ErrCorrupt)
			}
			if !ok {
				break
			}
			offB.Append(off)
			tsB.Append(g.ts)
			if rowB != nil {
				rowB.BinaryBuilder.Append(row)
			} else if err := l.sch.AppendArrow(decl, row); err != nil {
				return nil, fmt.Errorf("buffered row at offset %d does not convert to Arrow: %w: %w", off, err, ErrCorrupt)
			}
			off++
		}
		if off != g.first+g.n {
			return nil, fmt.Errorf("buffer group at offset %d says %d rows but holds %d: %w", g.first, g.n, off-g.first, ErrCorrupt)
		}
	}
	rec := bld.NewRecordBatch()
	if int(rec.NumRows()) != n {
		rec.Release()
		return nil, fmt.Errorf("built %d rows for [%d,%d): %w", rec.NumRows(), start, end, ErrCorrupt)
	}
	if len(l.cfg.SortBy) == 0 {
		return rec, nil
	}
	sorted, err := parquetfile.Sort(rec, l.SortColumns())
	rec.Release()
	return sorted, err
}

// SortColumns returns the file-schema indexes of the sort_by columns.
func (l *Log) SortColumns() []int {
	var idx []int
	for _, name := range l.cfg.SortBy {
		i, _ := l.sch.ColumnIndex(name)
		idx = append(idx, i+2)
	}
	return idx
}

func tsRange(groups []bufGroup) (lo, hi int64) {
	for i, g := range groups {
		if i == 0 || g.ts < lo {
			lo = g.ts
		}
		if i == 0 || g.ts > hi {
			hi = g.ts
		}
	}
	return lo, hi
}

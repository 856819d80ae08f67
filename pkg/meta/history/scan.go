package history

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/parquetfile"
)

// tailBatch is how many broker rows one record of a scan holds.
const tailBatch = 64 << 10

// eachRecord calls fn with records of part p holding the columns names
// (each a column of p.fileSc; streamcast_offset must be among them) for
// the rows of [lo, hi) ∩ the cut, in offset order, skipping files and row
// groups whose statistics rule out bs, and the broker's rows after them
// when withTail. A record is valid only during fn.
func (r *Reader) eachRecord(ctx context.Context, p *part, names []string, lo, hi int64, bs []bound, withTail bool, fn func(rec arrow.RecordBatch) error) error {
	lo, hi = max(lo, p.start), min(hi, p.end)
	if lo >= hi {
		return nil
	}
	// A closed log's table must hold every row to its end; the live log's
	// rows past the table are the broker's.
	checkTo := hi
	if len(p.tail) > 0 {
		checkTo = min(hi, p.pubEnd)
	}
	if err := p.check(lo, checkTo); err != nil {
		return err
	}
	sc := project(p.fileSc, names)
	for i := range p.files {
		f := &p.files[i]
		if f.hi < lo || f.lo >= hi {
			continue
		}
		if skipFile(p, f, bs) || f.tsLo > r.asOfTS {
			r.count(func(s *ScanStats) { s.FilesSkipped++ })
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		r.count(func(s *ScanStats) { s.FilesOpened++ })
		if err := r.readFile(ctx, p, f, sc, lo, hi, bs, fn); err != nil {
			return err
		}
	}
	if withTail && len(p.tail) > 0 {
		return r.tailRecords(p, sc, lo, hi, fn)
	}
	return nil
}

// project is the schema of sc's columns names, in that order.
func project(sc *arrow.Schema, names []string) *arrow.Schema {
	fields := make([]arrow.Field, 0, len(names))
	for _, n := range names {
		fields = append(fields, sc.Field(sc.FieldIndices(n)[0]))
	}
	return arrow.NewSchema(fields, nil)
}

// readFile reads the columns of sc from a data file, the row groups that
// hold offsets in [lo, hi) and that bs do not rule out, and hands fn each
// group's rows of the cut in offset order. A sorted log's file is read
// whole and put in offset order first: its row groups do not follow
// offsets.
func (r *Reader) readFile(ctx context.Context, p *part, f *pfile, sc *arrow.Schema, lo, hi int64, bs []bound, fn func(rec arrow.RecordBatch) error) (err error) {
	src, err := p.tbl.OpenFile(f.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("log %s: published file %s (offsets %d to %d) is gone though the pinned snapshot lists it: it was deleted under this read (retention or snapshot expiry outlasted its grace); read again", p.lg.Name, f.path, f.lo, f.hi)
		}
		return fmt.Errorf("log %s: open published file %s: %w", p.lg.Name, f.path, err)
	}
	defer src.Close()
	source := parquetfile.NewSource(src)
	fail := func(what string, err error) error {
		if source.Err() != nil {
			err = source.Err()
		}
		return fmt.Errorf("log %s: read published file %s (offsets %d to %d): %s: %w", p.lg.Name, f.path, f.lo, f.hi, what, err)
	}
	pq, err := parquetfile.NewReader(source)
	if err != nil {
		return fail("footer", err)
	}
	defer pq.Close()
	md := pq.MetaData()
	maxRows := int64(1)
	for i := range md.NumRowGroups() {
		maxRows = max(maxRows, md.RowGroup(i).NumRows())
	}
	ar, err := pqarrow.NewFileReader(pq, pqarrow.ArrowReadProperties{BatchSize: maxRows}, memory.DefaultAllocator)
	if err != nil {
		return fail("schema", err)
	}
	fileSc, err := ar.Schema()
	if err != nil {
		return fail("schema", err)
	}
	var top []int
	for _, fld := range sc.Fields() {
		idx := fileSc.FieldIndices(fld.Name)
		if len(idx) != 1 {
			return fail("columns", fmt.Errorf("it has no column %s", fld.Name))
		}
		top = append(top, idx[0])
	}
	leaves, err := ar.Manifest.GetFieldIndices(top)
	if err != nil {
		return fail("columns", err)
	}
	offLeaf := md.Schema.ColumnIndexByName(logstore.OffsetColumn)
	leaf := func(name string) int { return md.Schema.ColumnIndexByName(name) }
	var groups []int
	for i := range md.NumRowGroups() {
		rg := md.RowGroup(i)
		if gl, gh, err := parquetfile.MinMaxInt64(rg, offLeaf); err == nil && (gh < lo || gl >= hi) {
			continue
		}
		if skipGroup(rg, leaf, bs) {
			continue
		}
		groups = append(groups, i)
	}
	read := func(groups []int) error {
		tbl, err := readGroups(ctx, ar, leaves, groups)
		if err != nil {
			return fail(fmt.Sprintf("row groups %v", groups), err)
		}
		defer tbl.Release()
		rec, err := tableRecord(sc, tbl)
		if err != nil {
			return fail("columns", err)
		}
		defer rec.Release()
		if p.sorted {
			sorted, err := parquetfile.Sort(rec, []int{0})
			if err != nil {
				return fail("sort by offset", err)
			}
			defer sorted.Release()
			rec = sorted
		}
		return r.emit(rec, lo, hi, fn)
	}
	if p.sorted {
		if len(groups) == 0 {
			return nil
		}
		return read(groups)
	}
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !p.tbl.Local() {
			source.Prefetch(parquetfile.GroupSpan(md.RowGroup(g)))
		}
		if err := read([]int{g}); err != nil {
			return err
		}
	}
	return nil
}

// readGroups reads leaves of row groups, reporting a decoder panic on a
// damaged file as an error.
func readGroups(ctx context.Context, ar *pqarrow.FileReader, leaves, groups []int) (tbl arrow.Table, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("decoding failed: %v", p)
		}
	}()
	return ar.ReadRowGroups(ctx, leaves, groups)
}

// tableRecord makes one record of tbl's columns under schema sc.
func tableRecord(sc *arrow.Schema, tbl arrow.Table) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, tbl.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		ch := tbl.Column(i).Data()
		switch len(ch.Chunks()) {
		case 1:
			cols[i] = ch.Chunk(0)
			cols[i].Retain()
		default:
			a, err := array.Concatenate(ch.Chunks(), memory.DefaultAllocator)
			if err != nil {
				return nil, err
			}
			cols[i] = a
		}
	}
	return array.NewRecordBatch(sc, cols, tbl.NumRows()), nil
}

// emit hands fn the rows of rec (offset-ordered, offsets in column 0)
// with offsets in [lo, hi) and, under AsOfTS, streamcast_ts at most the
// fixed point: a slice when they are contiguous, else a copy.
func (r *Reader) emit(rec arrow.RecordBatch, lo, hi int64, fn func(rec arrow.RecordBatch) error) error {
	offs := rec.Column(0).(*array.Int64).Int64Values()
	var ts []int64
	if r.asOfTS != maxInt64 {
		if i := rec.Schema().FieldIndices(logstore.TSColumn); len(i) == 1 {
			ts = rec.Column(i[0]).(*array.Int64).Int64Values()
		}
	}
	if ts == nil {
		// Offsets ascend, so the rows of [lo, hi) are one run: find its
		// ends rather than look at every row.
		i, _ := slices.BinarySearch(offs, lo)
		j, _ := slices.BinarySearch(offs, hi)
		if i == j {
			return nil
		}
		if i == 0 && j == len(offs) {
			return fn(rec)
		}
		s := rec.NewSlice(int64(i), int64(j))
		defer s.Release()
		return fn(s)
	}
	idx := make([]int32, 0, len(offs))
	for i, o := range offs {
		if o >= lo && o < hi && (ts == nil || ts[i] <= r.asOfTS) {
			idx = append(idx, int32(i))
		}
	}
	switch {
	case len(idx) == 0:
		return nil
	case int(idx[len(idx)-1]-idx[0])+1 == len(idx):
		s := rec.NewSlice(int64(idx[0]), int64(idx[len(idx)-1])+1)
		defer s.Release()
		return fn(s)
	}
	t, err := parquetfile.Take(rec, idx)
	if err != nil {
		return err
	}
	defer t.Release()
	return fn(t)
}

// tailRecords hands fn the broker rows of p in [lo, hi) as records of sc,
// built from their canonical JSON.
func (r *Reader) tailRecords(p *part, sc *arrow.Schema, lo, hi int64, fn func(rec arrow.RecordBatch) error) error {
	bld := array.NewRecordBuilder(memory.DefaultAllocator, p.fileSc)
	defer bld.Release()
	flush := func() error {
		full := bld.NewRecordBatch()
		defer full.Release()
		if full.NumRows() == 0 {
			return nil
		}
		cols := make([]arrow.Array, 0, sc.NumFields())
		for _, fld := range sc.Fields() {
			cols = append(cols, full.Column(full.Schema().FieldIndices(fld.Name)[0]))
		}
		rec := array.NewRecordBatch(sc, cols, full.NumRows())
		defer rec.Release()
		return r.emit(rec, lo, hi, fn)
	}
	offB := bld.Field(0).(*array.Int64Builder)
	tsB := bld.Field(1).(*array.Int64Builder)
	decl := bld.Fields()[2:]
	n := 0
	for _, t := range p.tail {
		if t.offset < lo || t.offset >= hi {
			continue
		}
		offB.Append(t.offset)
		tsB.Append(t.ts)
		if p.sch.IsAny() {
			decl[0].(*array.StringBuilder).BinaryBuilder.Append(t.row)
		} else if err := p.sch.AppendArrow(decl, t.row); err != nil {
			return fmt.Errorf("log %s: row %d from the broker does not fit the log's schema: %w", p.lg.Name, t.offset, err)
		}
		if n++; n == tailBatch {
			if err := flush(); err != nil {
				return err
			}
			n = 0
		}
	}
	return flush()
}

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
// offsets. Its footer and each group's offsets are checked against the
// manifest's record first (logstore.CheckFooter, CheckRowOffsets), so a
// file replaced by another is refused, never read as the rows it stands
// for.
func (r *Reader) readFile(ctx context.Context, p *part, f *pfile, sc *arrow.Schema, lo, hi int64, bs []bound, fn func(rec arrow.RecordBatch) error) (err error) {
	src, err := p.tbl.OpenFile(f.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return p.gone(ctx, f)
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
	// The manifest's record of the file is what the pin planned from
	// (which files, which offsets): a file whose footer says otherwise
	// would answer with other rows than the cut's, so it is refused here,
	// by the check replay makes.
	spans, err := logstore.CheckFooter(md, f.lo, f.hi+1, f.rows)
	if err != nil {
		return p.replaced(f, source, err)
	}
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
	leaf := func(name string) int { return md.Schema.ColumnIndexByName(name) }
	var groups []int
	for i := range md.NumRowGroups() {
		rg := md.RowGroup(i)
		if spans[i].End <= lo || spans[i].Start >= hi {
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
		ordered, err := checkRows(rec, spans, groups)
		if err != nil {
			return p.replaced(f, source, err)
		}
		if p.sorted || !ordered {
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

// gone is the error for a published file the pinned snapshot lists and
// storage lacks. Retention deletes a file only once no current snapshot
// lists it, so when the table's current snapshot still lists the file it
// was not deleted under this read, and reading again would only fail
// again: the table has lost a file.
func (p *part) gone(ctx context.Context, f *pfile) error {
	if tbl, err := p.tbl.Load(ctx); err == nil {
		if live, err := p.tbl.CurrentFiles(ctx, tbl); err == nil && live.Has(p.tbl, f.path) {
			return &Refusal{Why: WhyDamaged, Msg: fmt.Sprintf("log %s: published file %s (offsets %d to %d) is missing: the table's current snapshot lists it, but storage holds no such file, so rows %d to %d cannot be read; put the file back from a backup (or a copy of the published prefix) and read again",
				p.lg.Name, f.path, f.lo, f.hi, f.lo, f.hi)}
		}
	}
	return fmt.Errorf("log %s: published file %s (offsets %d to %d) is gone though the pinned snapshot lists it: it was deleted under this read (retention or snapshot expiry outlasted its grace); read again", p.lg.Name, f.path, f.lo, f.hi)
}

// checkRows checks the offsets of rec, the rows of row groups groups read
// in that order, against the ranges the file's checked footer gives them
// (spans): each group's rows hold each offset of its range once. ordered
// is false when some group's rows are not in offset order.
func checkRows(rec arrow.RecordBatch, spans []logstore.Span, groups []int) (ordered bool, err error) {
	col, ok := rec.Column(0).(*array.Int64)
	if !ok || col.NullN() > 0 {
		return false, fmt.Errorf("its %s column is not a column of offsets without nulls", logstore.OffsetColumn)
	}
	offs := col.Int64Values()
	ordered = true
	pos := int64(0)
	for _, g := range groups {
		n := spans[g].End - spans[g].Start
		if pos+n > int64(len(offs)) {
			return false, fmt.Errorf("row group %d holds fewer rows than its footer says", g)
		}
		perm, err := logstore.CheckRowOffsets(offs[pos:pos+n], spans[g])
		if err != nil {
			return false, fmt.Errorf("row group %d: %w", g, err)
		}
		ordered = ordered && perm == nil
		pos += n
	}
	if pos != int64(len(offs)) {
		return false, fmt.Errorf("row groups %v hold %d rows where their footer says %d", groups, len(offs), pos)
	}
	return ordered, nil
}

// replaced is the refusal of a published file that does not hold what the
// table's manifest records for it: a read of it would not be exact. A
// failure to fetch the bytes is no verdict on the file and stays an I/O
// error, which a later read may not meet.
func (p *part) replaced(f *pfile, source *parquetfile.Source, err error) error {
	if source.Err() != nil {
		return fmt.Errorf("log %s: read published file %s (offsets %d to %d): %w", p.lg.Name, f.path, f.lo, f.hi, source.Err())
	}
	return &Refusal{Why: WhyDamaged, Msg: fmt.Sprintf("log %s: published file %s does not hold what the table records for it (offsets %d to %d in %d rows): %v; it was replaced or damaged after it was published, so rows %d to %d cannot be read exactly; put back the file published under this name (from a backup, or a copy of the published prefix) and read again",
		p.lg.Name, f.path, f.lo, f.hi, f.rows, err, f.lo, f.hi)}
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

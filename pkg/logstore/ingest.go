package logstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamcast/streamcast/internal/durable"
	"github.com/streamcast/streamcast/pkg/logstore/parquetfile"
	"github.com/streamcast/streamcast/pkg/schema"
)

// IngestSource hands Ingest the rows of a bulk load, in source order, as
// batches already checked against the log's schema: one array per declared
// column, in Columns() order, each of its column's Arrow type (for a log
// without a schema, one string array of JSON objects). Next returns io.EOF
// after the last batch. An error other than io.EOF stops the load; the
// batch it refused takes no offsets.
type IngestSource interface {
	Next(ctx context.Context) (arrow.RecordBatch, error)
}

// IngestOptions are the knobs of one Ingest.
type IngestOptions struct {
	// Position is how many rows of the source an earlier run loaded (the
	// --skip-rows the caller skipped): the first batch is source row
	// Position. Ingest records the position reached with each file, so a
	// killed run's successor knows where to resume (IngestMark).
	Position int64
	// Source names the source (an opaque fingerprint the caller makes),
	// recorded in the IngestMark so a later run can tell a rerun of the
	// same source from another one.
	Source string
	// Progress, when set, is called from Ingest's goroutine after each
	// batch is taken and after each file is recorded.
	Progress func(IngestProgress)
}

// IngestProgress is how far an Ingest has come.
type IngestProgress struct {
	Taken    int64 // rows taken from the source so far (offsets assigned in memory)
	Recorded int64 // rows in recorded files: they have landed
	Files    int   // files recorded
	Bytes    int64 // bytes of the recorded files
}

// IngestResult is what an Ingest landed: rows in files recorded in
// buffer.db with their offsets. On error it is what landed before it.
type IngestResult struct {
	Rows       int64 // rows landed
	Start, End int64 // their offsets, [Start, End); Start == End when none
	Files      int   // files recorded
	FileBytes  int64 // their size on disk
	// Position is the source row the next run starts at: the options'
	// Position plus Rows.
	Position int64
}

// IngestMark is the progress of the last ingest, as buffer.db records it
// (the ingest_progress entry of its meta table, docs/design.md §4.10) in
// the transaction that records each of its files, and once more when it
// reaches the end of its source (Done). A mark that is not Done means
// the ingest stopped partway (refused, failed or killed) after Position
// rows of its source had landed.
type IngestMark struct {
	Source   string `json:"source"`   // the caller's fingerprint of the source
	Position int64  `json:"position"` // source rows loaded, all runs of the source together
	Start    int64  `json:"start"`    // first offset the source took
	End      int64  `json:"end"`      // offset after the last row landed
	Done     bool   `json:"done"`     // the whole source has landed
}

const ingestMarkKey = "ingest_progress"

// Ingest writes a bulk load straight to Parquet files, bypassing the
// buffer: the rows take the log's next offsets in source order, stamped
// (streamcast_ts) with the time their batch is taken. Each file holds
// row groups of about an eighth of TargetFileBytes (Arrow bytes), each a
// contiguous offset range ordered by sort_by then offset as seal and
// compaction write them, and ends at about TargetFileBytes on disk.
//
// Each file records its intent (a seal intent) before it exists, is
// written and fsynced, and then one buffer.db transaction records the
// file with its statistics, advances the next offset past it and sets the
// IngestMark. A kill at any point leaves whole recorded files and dense
// offsets; the file it interrupted is deleted by the seal recovery of the
// next writable open or seal pass (docs/design.md §4.4). When the source
// fails partway, the rows already taken are recorded (never the refused
// batch), so what landed is exactly the source's first rows.
//
// Ingest needs the Writer handle (the server stopped, I7) and a buffer
// whose rows are all in files (logstore.ErrUnsealed otherwise). It holds
// the seal role (logstore.RoleSeal), so no sealer runs beside it.
//
// The run lives here, beside Seal, and works through the record API; the
// writer's next offset stays in pkg/logstore (I1), which takes the fence
// and unsealed checks (Log.IngestStart) and moves the offset in the
// transaction that records each file (Log.AdvanceNext).
func (l *Log) Ingest(ctx context.Context, src IngestSource, o IngestOptions) (IngestResult, error) {
	res := IngestResult{Position: o.Position}
	if l.Mode() != Writer {
		return res, fmt.Errorf("ingest into log %s (open as %s): %w", l.Dir(), l.Mode(), ErrNotWriter)
	}
	// Under the seal role: no sealer runs beside the load, and what a
	// killed load left is recovered first.
	release, err := begin(l, "ingest into log", RoleSeal)
	if err != nil {
		return res, err
	}
	defer release()
	if err := l.RecoverSeals(ctx); err != nil {
		return res, fmt.Errorf("ingest into log %s: %w", l.Dir(), err)
	}
	next, err := l.IngestStart(ctx)
	if err != nil {
		return res, err
	}
	res.Start, res.End = next, next
	in := &ingestRun{l: l, o: o, res: &res, next: next}
	in.markStart = next
	if m, ok, err := l.ReadIngestMark(ctx); err != nil {
		return res, err
	} else if ok && !m.Done && m.End == next && o.Position > 0 {
		in.markStart = m.Start // a resumed source: its range goes on
	}
	err = in.run(ctx, src)
	return res, err
}

// ReadIngestMark returns the progress the last ingest into l recorded; ok
// is false when none is recorded (no ingest landed a row, or
// ClearIngestMark).
func (l *Log) ReadIngestMark(ctx context.Context) (m IngestMark, ok bool, err error) {
	var raw []byte
	err = l.records().QueryRowContext(ctx, `SELECT v FROM meta WHERE k = ?`, ingestMarkKey).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("read the ingest progress of log %s: %w", l.Dir(), err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, false, fmt.Errorf("the ingest progress buffer.db records for log %s is not valid JSON: %w", l.Dir(), err)
	}
	return m, true, nil
}

// ClearIngestMark forgets the last ingest's progress: the caller loads
// another source, or gave up on the rest of the last one.
func (l *Log) ClearIngestMark(ctx context.Context) error {
	return l.update(ctx, func(c *recordTx) error {
		_, err := c.ExecContext(ctx, `DELETE FROM meta WHERE k = ?`, ingestMarkKey)
		return err
	})
}

// ingestRun is one Ingest's state.
type ingestRun struct {
	l         *Log
	o         IngestOptions
	res       *IngestResult
	next      int64 // next offset to assign (in memory until a file is recorded)
	markStart int64 // the source's first offset, for the mark

	pending      []arrow.RecordBatch // file-schema batches of the next row group
	pendingBytes int64
	taken        int64

	file     *ingestFile // the file being written; nil between files
	inflight *groupWrite // the file's row group being written, if any
	marked   bool        // the mark says Done
}

func (in *ingestRun) mark(end, position int64, done bool) IngestMark {
	return IngestMark{Source: in.o.Source, Position: position, Start: in.markStart, End: end, Done: done}
}

// setMark records m in buffer.db's meta table.
func setMark(ctx context.Context, c *recordTx, m IngestMark) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = c.ExecContext(ctx, `INSERT INTO meta(k, v) VALUES (?, ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v`, ingestMarkKey, string(b))
	return err
}

// ingestFile is one file being written.
type ingestFile struct {
	tmp, name    string // the name while written, and its final name
	start, end   int64
	w            *parquetfile.Writer
	stats        *Merger
	rows         int64
	arrowBytes   int64
	minTS, maxTS int64
}

// ingestRead is one batch the reader goroutine hands over.
type ingestRead struct {
	rec arrow.RecordBatch
	err error
}

func (in *ingestRun) run(ctx context.Context, src IngestSource) (err error) {
	// Reading and checking the source runs on its own goroutine, ahead
	// of the sort, encoding and compression of the previous batches.
	rctx, cancel := context.WithCancel(ctx)
	ch := make(chan ingestRead, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		for {
			rec, err := src.Next(rctx)
			select {
			case ch <- ingestRead{rec, err}:
			case <-rctx.Done():
				if rec != nil {
					rec.Release()
				}
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		cancel()
		for r := range ch {
			if r.rec != nil {
				r.rec.Release()
			}
		}
		<-done
		in.dropInflight()
		in.releasePending()
	}()
	var srcErr error
	ended := false // the source said io.EOF: nothing else is its end
	for r := range ch {
		if r.err != nil {
			if errors.Is(r.err, io.EOF) {
				ended = true
			} else {
				srcErr = r.err
			}
			break
		}
		err := in.take(ctx, r.rec)
		r.rec.Release()
		if err != nil {
			in.abortFile(ctx)
			return err
		}
		if err := ctx.Err(); err != nil {
			srcErr = err
			break
		}
	}
	if srcErr == nil && !ended {
		// The reader stopped for ctx before the source's end.
		srcErr = ctx.Err()
		if srcErr == nil {
			srcErr = errors.New("the source stopped before its end")
		}
	}
	// Record what was taken, refused source or not: those rows come
	// before the refused batch and land; the refused batch never took
	// offsets. A cancelled ctx still finishes the file under way.
	wctx := context.WithoutCancel(ctx)
	if err := in.flushGroup(wctx); err != nil {
		in.abortFile(wctx)
		return errors.Join(srcErr, err)
	}
	if err := in.closeFile(wctx, srcErr == nil); err != nil {
		in.abortFile(wctx)
		return errors.Join(srcErr, err)
	}
	if srcErr == nil && !in.marked {
		// The source ended with no file open: mark it done on its own.
		mark := in.mark(in.res.End, in.o.Position+in.res.Rows, true)
		if err := in.l.update(wctx, func(c *recordTx) error { return setMark(wctx, c, mark) }); err != nil {
			return fmt.Errorf("record the end of the ingest: %w", err)
		}
	}
	return srcErr
}

// take gives rec (declared columns) the next offsets and a stamp and adds
// it to the pending row group, writing the group once it is full.
func (in *ingestRun) take(ctx context.Context, rec arrow.RecordBatch) error {
	l := in.l
	n := rec.NumRows()
	if n == 0 {
		return nil
	}
	fields := l.FileSchema().Fields()
	if int(rec.NumCols()) != len(fields)-2 {
		return fmt.Errorf("ingest into log %s: a batch of %d columns where the log has %d", l.Dir(), rec.NumCols(), len(fields)-2)
	}
	mem := memory.DefaultAllocator
	ob := array.NewInt64Builder(mem)
	ob.Reserve(int(n))
	for i := range n {
		ob.UnsafeAppend(in.next + i)
	}
	offs := ob.NewArray()
	ob.Release()
	ts := l.Now().UnixMicro()
	tb := array.NewInt64Builder(mem)
	tb.Reserve(int(n))
	for range n {
		tb.UnsafeAppend(ts)
	}
	tss := tb.NewArray()
	tb.Release()
	cols := make([]arrow.Array, 0, len(fields))
	cols = append(cols, offs, tss)
	for k, c := range rec.Columns() {
		want := fields[k+2].Type
		if !arrow.TypeEqual(c.DataType(), want) {
			offs.Release()
			tss.Release()
			return fmt.Errorf("ingest into log %s: column %s is %s in the batch where the log stores %s", l.Dir(), fields[k+2].Name, c.DataType(), want)
		}
		cols = append(cols, retype(c, want))
	}
	out := array.NewRecordBatch(l.FileSchema(), cols, n)
	for _, c := range cols {
		c.Release()
	}
	defer out.Release()
	in.next += n
	in.taken += n
	// A batch larger than what the row group lacks is cut, so row groups
	// keep their target whatever the source's batches.
	target := in.groupTarget()
	perRow := max(parquetfile.ArrowBytes(out)/n, 1)
	for lo := int64(0); lo < n; {
		k := min(n-lo, max((target-in.pendingBytes+perRow-1)/perRow, 1))
		part := out.NewSlice(lo, lo+k)
		in.pending = append(in.pending, part)
		in.pendingBytes += k * perRow
		lo += k
		if in.pendingBytes >= target {
			if err := in.flushGroup(ctx); err != nil {
				return err
			}
		}
	}
	if in.o.Progress != nil {
		in.o.Progress(in.progress())
	}
	return nil
}

func (in *ingestRun) progress() IngestProgress {
	return IngestProgress{Taken: in.taken, Recorded: in.res.Rows, Files: in.res.Files, Bytes: in.res.FileBytes}
}

// groupTarget is the Arrow size of a row group: an eighth of the file
// target, as compaction cuts them.
func (in *ingestRun) groupTarget() int64 {
	return in.l.Policy().RowGroupBytes()
}

func (in *ingestRun) releasePending() {
	for _, r := range in.pending {
		r.Release()
	}
	in.pending, in.pendingBytes = in.pending[:0], 0
}

// flushGroup hands the pending rows to the file as one row group, sorted
// by sort_by then offset, opening a file first when none is open. The
// group is encoded on a goroutine of its own (groupWrite) while the run
// takes and sorts the next one; the group before it is settled first, so
// at most one is in flight.
func (in *ingestRun) flushGroup(ctx context.Context) error {
	if len(in.pending) == 0 {
		return nil
	}
	l := in.l
	rec, err := parquetfile.Concat(l.FileSchema(), in.pending)
	in.releasePending()
	if err != nil {
		return err
	}
	if len(l.Config().SortBy) > 0 {
		sorted, err := parquetfile.Sort(rec, l.SortColumns())
		rec.Release()
		if err != nil {
			return err
		}
		rec = sorted
	}
	if err := in.settle(ctx); err != nil {
		rec.Release()
		return err
	}
	if in.file == nil {
		if err := in.openFile(ctx, rec.Column(0).(*array.Int64)); err != nil {
			rec.Release()
			return err
		}
	}
	g := &groupWrite{rec: rec, done: make(chan struct{})}
	w, sch := in.file.w, l.Schema()
	go func() {
		defer close(g.done)
		if g.err = w.WriteGroup(rec); g.err != nil {
			return
		}
		g.stats, g.statsErr = groupStats(sch, rec, w)
	}()
	in.inflight = g
	return nil
}

// groupWrite is a row group being written by its own goroutine; the
// run owns it and waits for done (settle or dropInflight) on every path.
type groupWrite struct {
	rec      arrow.RecordBatch
	done     chan struct{}
	err      error // the write's
	stats    []byte
	statsErr error
}

// settle waits for the row group in flight and counts it into its file,
// closing the file once it reaches the target.
func (in *ingestRun) settle(ctx context.Context) error {
	g := in.inflight
	if g == nil {
		return nil
	}
	<-g.done
	in.inflight = nil
	defer g.rec.Release()
	l, f, rec := in.l, in.file, g.rec
	if g.err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(l.FilesDir(), f.tmp), g.err)
	}
	if g.statsErr != nil {
		return g.statsErr
	}
	f.stats.Add(g.stats)
	n := rec.NumRows()
	stamps := rec.Column(1).(*array.Int64).Int64Values()
	if f.rows == 0 {
		f.minTS, f.maxTS = stamps[0], stamps[0]
	}
	for _, t := range stamps {
		f.minTS, f.maxTS = min(f.minTS, t), max(f.maxTS, t)
	}
	f.rows += n
	f.end = f.start + f.rows
	f.arrowBytes += parquetfile.ArrowBytes(rec)
	if f.w.Size() >= l.Policy().TargetFileBytes {
		return in.closeFile(ctx, false)
	}
	return nil
}

// dropInflight waits for the row group in flight, if any, and forgets it.
func (in *ingestRun) dropInflight() {
	if g := in.inflight; g != nil {
		<-g.done
		g.rec.Release()
		in.inflight = nil
	}
}

// openFile records the intent of a file starting at the first offset of
// offs' range and creates it.
func (in *ingestRun) openFile(ctx context.Context, offs *array.Int64) error {
	l := in.l
	// The group's rows are contiguous offsets; its smallest is where the
	// file starts (it is the first group of the file).
	lo := offs.Value(0)
	for _, v := range offs.Int64Values() {
		lo = min(lo, v)
	}
	tmp := fmt.Sprintf("%d-ingest-%s.parquet.partial", lo, NewToken())
	err := addSealIntent(ctx, l, tmp, lo, lo)
	if err != nil {
		return fmt.Errorf("record the intent to write a file from offset %d: %w", lo, err)
	}
	// A bulk load's columns are encoded on every core (the same file
	// seal would write; encoding and zstd are most of the load's time).
	w, err := parquetfile.CreateConcurrent(filepath.Join(l.FilesDir(), tmp), l.FileSchema(), runtime.GOMAXPROCS(0))
	if err != nil {
		_ = l.RecoverSeals(context.WithoutCancel(ctx))
		return fmt.Errorf("create a file from offset %d: %w", lo, err)
	}
	in.file = &ingestFile{tmp: tmp, start: lo, end: lo, w: w, stats: NewMerger(l.Schema())}
	return nil
}

// closeFile finishes the open file and records it: name it by its range
// (intent first), fsync, and in one transaction record the file, advance
// the next offset and set the mark (or clear it when last is the end of
// the source).
func (in *ingestRun) closeFile(ctx context.Context, last bool) error {
	// The group in flight first: it may itself close the file at the
	// target, which leaves none to close here.
	if err := in.settle(ctx); err != nil {
		return err
	}
	f := in.file
	if f == nil {
		return nil
	}
	l := in.l
	dir := l.FilesDir()
	size, err := f.w.Close()
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, f.tmp), err)
	}
	if err := l.atCrashPoint("ingest:written"); err != nil {
		return err
	}
	// Named as seal and compaction name files, so recovery knows them.
	name := fmt.Sprintf("%d-%d-%s.parquet", f.start, f.end, NewToken())
	// The final name's intent before the rename, so a crash after it
	// leaves a file an intent names.
	err = addSealIntent(ctx, l, name, f.start, f.end)
	if err != nil {
		return fmt.Errorf("record the intent to name %s: %w", name, err)
	}
	if err := os.Rename(filepath.Join(dir, f.tmp), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("name the file for offsets [%d,%d): %w", f.start, f.end, err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return err
	}
	stats, err := f.stats.Encode()
	if err != nil {
		return err
	}
	mark := in.mark(f.end, in.o.Position+in.res.Rows+f.rows, last)
	// One transaction records the file, advances the next offset past it
	// and sets the mark; AdvanceNext refuses when another process wrote.
	err = l.AdvanceNext(ctx, f.start, f.end, func(c *recordTx) error {
		for _, n := range []string{f.tmp, name} {
			if _, err := c.ExecContext(ctx, `DELETE FROM seal_intents WHERE name = ?`, n); err != nil {
				return err
			}
		}
		if _, err := c.ExecContext(ctx, `INSERT INTO files(start_offset, end_offset, name, row_count, arrow_bytes, json_bytes, file_bytes, min_ts, max_ts, stats, sealed_us)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			f.start, f.end, name, f.rows, f.arrowBytes, 0, size, f.minTS, f.maxTS, string(stats), l.Now().UnixMicro()); err != nil {
			return err
		}
		return setMark(ctx, c, mark)
	})
	if err == nil {
		in.marked = last
	}
	if err != nil {
		return fmt.Errorf("record %s for offsets [%d,%d): %w", name, f.start, f.end, err)
	}
	in.file = nil
	in.res.Rows += f.rows
	in.res.End = f.end
	in.res.Files++
	in.res.FileBytes += size
	in.res.Position = in.o.Position + in.res.Rows
	if in.o.Progress != nil {
		in.o.Progress(in.progress())
	}
	return nil
}

// abortFile gives up the open file: seal recovery deletes whatever its
// intents name. Rows recorded before it stay.
func (in *ingestRun) abortFile(ctx context.Context) {
	in.dropInflight()
	if in.file == nil {
		return
	}
	in.file.w.Abort()
	in.file = nil
	_ = in.l.RecoverSeals(context.WithoutCancel(ctx))
}

// retype returns arr with type dt, which equals arr's type but for field
// metadata (the file schema's Iceberg field ids): the same buffers under
// the exact type the file schema names.
func retype(arr arrow.Array, dt arrow.DataType) arrow.Array {
	if arrow.TypeEqual(arr.DataType(), dt, arrow.CheckMetadata()) {
		arr.Retain()
		return arr
	}
	d := retypeData(arr.Data(), dt)
	defer d.Release()
	return array.MakeFromData(d)
}

func retypeData(d arrow.ArrayData, dt arrow.DataType) arrow.ArrayData {
	var childTypes []arrow.DataType
	switch t := dt.(type) {
	case *arrow.StructType:
		for _, f := range t.Fields() {
			childTypes = append(childTypes, f.Type)
		}
	case *arrow.MapType:
		childTypes = []arrow.DataType{t.Elem()}
	case arrow.ListLikeType:
		childTypes = []arrow.DataType{t.Elem()}
	}
	children := make([]arrow.ArrayData, len(d.Children()))
	for i, c := range d.Children() {
		if i < len(childTypes) {
			children[i] = retypeData(c, childTypes[i])
		} else {
			c.Retain()
			children[i] = c
		}
	}
	out := array.NewData(dt, d.Len(), d.Buffers(), children, d.NullN(), d.Offset())
	for _, c := range children {
		c.Release()
	}
	return out
}

// groupStats returns the column statistics of the row group w wrote last
// from rec, as Compute would compute them from rec's declared
// columns, but taking each column's bounds from those the Parquet writer
// computed while it wrote the group (parquetfile.GroupBounds) where they
// are exact: seal computes them a second time, which costs a bulk load a
// seventh of its time. Where the writer has none, rec's column is
// scanned; a float column holding NaN has no bounds (Parquet's leave NaN
// out).
func groupStats(sch *schema.Schema, rec arrow.RecordBatch, w *parquetfile.Writer) ([]byte, error) {
	cols := rec.Columns()[2:]
	if sch.IsAny() {
		return Compute(sch, cols)
	}
	bounds, err := w.GroupBounds(rec)
	if err != nil {
		return nil, fmt.Errorf("read the statistics of the row group written: %w", err)
	}
	defer func() {
		for _, b := range bounds {
			if b != nil {
				b.Release()
			}
		}
	}()
	// The writer's float bounds leave NaN out; Compute's have none then.
	for i, c := range cols {
		if bounds[i+2] != nil && hasNaN(c) {
			bounds[i+2].Release()
			bounds[i+2] = nil
		}
	}
	return ComputeWithBounds(sch, cols, bounds[2:])
}

// hasNaN reports whether a float column holds a NaN (in a value or under
// a null: either way the scan decides).
func hasNaN(a arrow.Array) bool {
	switch a := a.(type) {
	case *array.Float64:
		for _, v := range a.Float64Values() {
			if v != v {
				return true
			}
		}
	case *array.Float32:
		for _, v := range a.Float32Values() {
			if v != v {
				return true
			}
		}
	}
	return false
}

package logstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/streamcast/streamcast/internal/durable"
	"github.com/streamcast/streamcast/pkg/logstore/parquetfile"
)

// Compaction policy: size-tiered merging of adjacent files. A file's
// class says how far it is from the target: class 0 is finished (at least
// TargetFileBytes), class 1 at least a fanout-th of the target, class 2 a
// fanout-th of that, and so on. When fanout files of one class lie side by
// side (with only smaller files between them) they are merged into one file
// of a lower class. So a row is rewritten about once per class,
// log_fanout(target / file size) times (four for 512 MiB targets and
// 0.5 MiB seals), and fewer than fanout files of each class wait, locally
// and in the published table: the file count stays bounded whatever the
// rate of appends.
const fanout = 8

// sizeClass returns the class of a file of size bytes against target.
func sizeClass(size, target int64) int {
	k, bound := 0, target
	for size < bound && k < 30 {
		bound /= fanout
		k++
	}
	return k
}

// errCompactionVoid reports a merge whose inputs changed under it
// (another step took one of them); its output was discarded.
var errCompactionVoid = errors.New("the inputs changed during the merge; its output was discarded")

// Compact merges runs of adjacent small local files into larger ones, up
// to TargetFileBytes on disk, and returns the number of rows rewritten.
// Files merge by size class (see fanout): a row is rewritten a few times
// on its way to a finished file, and few small files wait at any time.
// With flush it merges every stretch of two or more unfinished files
// whatever their size (for shutdown and tests). Offset ranges never
// overlap: an output covers exactly the inputs it replaces, and each of
// its row groups (about an eighth of the target) holds a contiguous offset
// range sorted by sort_by, then offset.
//
// A file the published table already holds may be merged: publish then
// swaps the published copies for the merged file in one commit. Files a
// publish pass is uploading are left alone until it ends.
//
// Each merge records its intent (output name, range and inputs) before the
// output exists, and replaces the inputs by the output in one transaction
// after the output is written and fsynced; the inputs go to the delete
// queue. An interrupted merge is undone by the next pass: its output is
// deleted and the inputs, still live, are merged again. Compact runs under
// compact.lock: when another process is compacting this log it returns an
// error wrapping logstore.ErrBusy.
func (l *Log) Compact(ctx context.Context, flush bool) (rewritten int64, err error) {
	end, err := begin(l, "compact log", RoleCompact)
	if err != nil {
		return 0, err
	}
	defer end()
	if err := recoverCompactions(ctx, l); err != nil {
		return 0, fmt.Errorf("compact log %s: %w", l.Dir(), err)
	}
	for range 1000 { // a pass ends; the next one carries on
		run, err := planCompaction(ctx, l, flush)
		if err != nil {
			return rewritten, fmt.Errorf("compact log %s: %w", l.Dir(), err)
		}
		if len(run) == 0 {
			return rewritten, nil
		}
		n, err := merge(ctx, l, run)
		if errors.Is(err, errCompactionVoid) {
			continue
		}
		if err != nil {
			return rewritten, fmt.Errorf("compact log %s [%d,%d): %w", l.Dir(), run[0].start, run[len(run)-1].end, err)
		}
		rewritten += n
		if err := ctx.Err(); err != nil {
			return rewritten, err
		}
	}
	return rewritten, nil
}

// planCompaction returns the next run of files to merge, or none.
func planCompaction(ctx context.Context, l *Log, flush bool) ([]localFile, error) {
	files, err := localFiles(ctx, l.records())
	if err != nil {
		return nil, err
	}
	publishing, err := spans(ctx, l.records(), `SELECT start_offset, end_offset FROM publish_intents`)
	if err != nil {
		return nil, err
	}
	return pickMerge(files, publishing, l.Policy().TargetFileBytes, flush), nil
}

// pickMerge chooses the files of one merge: adjacent unfinished files,
// none under a publish intent, per the size-tiered policy (with flush:
// every stretch of two or more).
func pickMerge(files []localFile, publishing []Span, target int64, flush bool) []localFile {
	// Stretches: maximal runs of contiguous, unfinished, idle files.
	var stretches [][]localFile
	var cur []localFile
	for i, f := range files {
		if f.fileBytes >= target || overlaps(publishing, f.start, f.end) || (i > 0 && files[i-1].end != f.start) {
			if len(cur) > 0 {
				stretches = append(stretches, cur)
			}
			cur = nil
			if f.fileBytes >= target || overlaps(publishing, f.start, f.end) {
				continue
			}
		}
		cur = append(cur, f)
	}
	if len(cur) > 0 {
		stretches = append(stretches, cur)
	}
	for _, st := range stretches {
		if flush {
			if len(st) >= 2 {
				return st
			}
			continue
		}
		// Smallest class first: small files merge among themselves before
		// they ride along in a merge of larger ones.
		top := 0
		for _, f := range st {
			top = max(top, sizeClass(f.fileBytes, target))
		}
		for k := top; k >= 1; k-- {
			// Windows of files of class k or smaller; merge one that holds
			// fanout files of class exactly k, up to the fanout-th.
			start, n := -1, 0
			for i, f := range st {
				c := sizeClass(f.fileBytes, target)
				if c < k {
					start, n = -1, 0
					continue
				}
				if start < 0 {
					start = i
				}
				if c == k {
					n++
				}
				if n == fanout {
					return st[start : i+1]
				}
			}
		}
	}
	return nil
}

// recoverCompactions undoes merges a crashed process left: their outputs
// are deleted and the intents dropped; their inputs are still live. The
// caller holds compact.lock.
func recoverCompactions(ctx context.Context, l *Log) error {
	rows, err := l.records().QueryContext(ctx, `SELECT name FROM compact_intents`)
	if err != nil {
		return fmt.Errorf("read compaction intents: %w", err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	dir := l.FilesDir()
	for _, name := range names {
		// The file goes before the intent: the other order would leave a
		// file no record mentions if we crashed in between.
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s left by an interrupted merge: %w", name, err)
		}
		if err := durable.SyncDir(dir); err != nil {
			return err
		}
		if err := l.update(ctx, func(c *recordTx) error {
			_, err := c.ExecContext(ctx, `DELETE FROM compact_intents WHERE name = ?`, name)
			return err
		}); err != nil {
			return fmt.Errorf("drop the intent of interrupted merge %s: %w", name, err)
		}
	}
	return nil
}

// merge rewrites run into one file: intent, file, replacement.
func merge(ctx context.Context, l *Log, run []localFile) (int64, error) {
	start, end := run[0].start, run[len(run)-1].end
	name := newFileName(start, end)
	inputs := make([]string, len(run))
	for i, f := range run {
		inputs[i] = f.name
	}
	inputsJSON, _ := json.Marshal(inputs)
	// 1. The intent, checked against the inputs in the same transaction.
	err := l.update(ctx, func(c *recordTx) error {
		if ok, err := inputsLive(ctx, c, run); err != nil || !ok {
			if err == nil {
				err = errCompactionVoid
			}
			return err
		}
		_, err := c.ExecContext(ctx, `INSERT INTO compact_intents(name, start_offset, end_offset, inputs, created_us) VALUES (?, ?, ?, ?, ?)`,
			name, start, end, string(inputsJSON), l.Now().UnixMicro())
		return err
	})
	if err != nil {
		return 0, err
	}
	// 2. The file, fsynced with its directory.
	out, err := writeMerged(ctx, l, name, run)
	if err != nil {
		_ = recoverCompactions(context.WithoutCancel(ctx), l)
		return 0, err
	}
	if err := l.atCrashPoint("compact:written"); err != nil {
		return 0, err
	}
	// 3. The replacement: inputs out, output in, inputs queued for deletion.
	pol := l.Policy()
	err = l.update(ctx, func(c *recordTx) error {
		if ok, err := inputsLive(ctx, c, run); err != nil || !ok {
			if err == nil {
				err = errCompactionVoid
			}
			return err
		}
		res, err := c.ExecContext(ctx, `DELETE FROM compact_intents WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("the intent for %s is gone: a recovery undid this merge", name)
		}
		for _, f := range run {
			if _, err := c.ExecContext(ctx, `DELETE FROM files WHERE start_offset = ?`, f.start); err != nil {
				return err
			}
		}
		if err := enqueue(ctx, c, tierLocal, l.Now().Add(pol.LocalDeleteGrace), "merged into "+name, inputs...); err != nil {
			return err
		}
		_, err = c.ExecContext(ctx, `INSERT INTO files(`+localFileCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			out.start, out.end, out.name, out.rows, out.arrowBytes, out.jsonBytes, out.fileBytes, out.minTS, out.maxTS, out.stats, out.sealedUS)
		return err
	})
	if err != nil {
		// Undo now rather than at the next pass (which would do it anyway).
		_ = recoverCompactions(context.WithoutCancel(ctx), l)
		return 0, err
	}
	return end - start, nil
}

// inputsLive reports whether every input is still a local file as planned.
func inputsLive(ctx context.Context, c *recordTx, run []localFile) (bool, error) {
	for _, f := range run {
		var name string
		var end int64
		err := c.QueryRowContext(ctx, `SELECT name, end_offset FROM files WHERE start_offset = ?`, f.start).Scan(&name, &end)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if name != f.name || end != f.end {
			return false, nil
		}
	}
	return true, nil
}

// writeMerged writes the rows of run, in order, into files/name, and
// returns the new file's record.
func writeMerged(ctx context.Context, l *Log, name string, run []localFile) (localFile, error) {
	out := localFile{start: run[0].start, end: run[len(run)-1].end, name: name, minTS: run[0].minTS, maxTS: run[0].maxTS}
	for _, f := range run {
		out.jsonBytes += f.jsonBytes
		out.minTS = min(out.minTS, f.minTS)
		out.maxTS = max(out.maxTS, f.maxTS)
		out.sealedUS = max(out.sealedUS, f.sealedUS)
	}
	w, err := parquetfile.Create(filepath.Join(l.FilesDir(), name), l.FileSchema())
	if err != nil {
		return out, err
	}
	closed := false
	defer func() {
		if !closed {
			w.Abort() // the intent's recovery deletes the partial file
		}
	}()
	stats := NewMerger(l.Schema())
	rgTarget := l.Policy().RowGroupBytes()
	sortCols := append(l.SortColumns(), 0) // sort_by, then offset
	var pending []arrow.RecordBatch
	var pendingBytes int64
	release := func() {
		for _, r := range pending {
			r.Release()
		}
		pending, pendingBytes = pending[:0], 0
	}
	defer release()
	write := func(rec arrow.RecordBatch) error {
		st, err := Compute(l.Schema(), rec.Columns()[2:])
		if err != nil {
			return err
		}
		stats.Add(st)
		out.rows += rec.NumRows()
		out.arrowBytes += parquetfile.ArrowBytes(rec)
		return w.WriteGroup(rec)
	}
	flushPending := func() error {
		if len(pending) == 0 {
			return nil
		}
		rec, err := parquetfile.Concat(l.FileSchema(), pending)
		release()
		if err != nil {
			return err
		}
		defer rec.Release()
		if len(l.Config().SortBy) > 0 {
			sorted, err := parquetfile.Sort(rec, sortCols)
			if err != nil {
				return err
			}
			defer sorted.Release()
			return write(sorted)
		}
		return write(rec)
	}
	for _, f := range run {
		err := l.EachRowGroup(ctx, f.name, f.start, f.end, f.rows, func(rec arrow.RecordBatch) error {
			b := parquetfile.ArrowBytes(rec)
			if b >= rgTarget/2 {
				// Big enough to stand alone, and sorted already.
				if err := flushPending(); err != nil {
					return err
				}
				return write(rec)
			}
			rec.Retain()
			pending = append(pending, rec)
			pendingBytes += b
			if pendingBytes >= rgTarget {
				return flushPending()
			}
			return nil
		})
		if errors.Is(err, ErrFileGone) {
			return out, errCompactionVoid
		}
		if err != nil {
			return out, err
		}
	}
	if err := flushPending(); err != nil {
		return out, err
	}
	if out.rows != out.end-out.start {
		return out, fmt.Errorf("merged %d rows for [%d,%d): %w", out.rows, out.start, out.end, ErrCorrupt)
	}
	// The footer, then the file and its directory fsynced.
	closed = true
	size, err := w.Close()
	if err != nil {
		return out, fmt.Errorf("write %s: %w", name, err)
	}
	out.fileBytes = size
	enc, err := stats.Encode()
	if err != nil {
		return out, err
	}
	out.stats = string(enc)
	return out, nil
}

package logstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamcast/streamcast/internal/durable"
	"github.com/streamcast/streamcast/pkg/logstore/colstats"
	"github.com/streamcast/streamcast/pkg/logstore/parquetfile"
)

// Seal turns buffered rows into Parquet files under files/. Without flush it
// seals only whole targets (TargetSealBytes of Arrow data each) and leaves a
// partial one buffered; with flush it seals everything buffered. It returns
// the number of rows sealed. Rows stay in the buffer until Evict.
//
// Seal first recovers any seal a crashed process left half done. It runs
// under seal.lock: when another process is sealing this log it returns an
// error wrapping ErrBusy.
func (l *Log) Seal(ctx context.Context, flush bool) (sealed int64, err error) {
	end, err := l.beginStep("seal log", &l.sealMu, "seal")
	if err != nil {
		return 0, err
	}
	defer end()
	if err := l.recoverSeals(ctx); err != nil {
		return 0, fmt.Errorf("seal log %s: %w", l.dir, err)
	}
	sealed, err = l.sealAll(ctx, flush)
	if err != nil {
		return sealed, fmt.Errorf("seal log %s: %w", l.dir, err)
	}
	return sealed, nil
}

// built is one file's worth of rows, converted and ready to write.
type built struct {
	in  sealInput
	rec arrow.RecordBatch
	err error
}

// sealAll seals file after file in a two-stage pipeline: while one file is
// written and fsynced, the next one's rows are read and converted. Each
// file still goes through intent, write and completion in order, and the
// files are completed in offset order, each starting where the previous
// one ended.
func (l *Log) sealAll(ctx context.Context, flush bool) (sealed int64, err error) {
	start, ratio, err := l.sealStart(ctx)
	if err != nil {
		return 0, err
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan built, 1)
	go func() {
		defer close(ch)
		for {
			in, ok, err := l.readSealInput(pctx, start, ratio, flush)
			if err != nil {
				ch <- built{err: err}
				return
			}
			if !ok {
				return
			}
			rec, err := l.buildRecord(in)
			select {
			case ch <- built{in: in, rec: rec, err: err}:
			case <-pctx.Done():
				if rec != nil {
					rec.Release()
				}
				return
			}
			if err != nil {
				return
			}
			start = in.end
			if in.jsonBytes > 0 {
				ratio = float64(parquetfile.ArrowBytes(rec)) / float64(in.jsonBytes)
			}
		}
	}()
	defer func() {
		cancel()
		for b := range ch { // let the producer finish; free what it built
			if b.rec != nil {
				b.rec.Release()
			}
		}
	}()
	for b := range ch {
		if b.err != nil {
			return sealed, b.err
		}
		err := l.sealFile(ctx, b.in, b.rec)
		b.rec.Release()
		if err != nil {
			return sealed, err
		}
		sealed += b.in.end - b.in.start
	}
	return sealed, ctx.Err()
}

// roleLock takes <log>/<role>.lock, refusing with ErrBusy when another
// process holds it.
func (l *Log) roleLock(role string) (*fileLock, error) {
	path := filepath.Join(l.dir, role+".lock")
	lk, err := tryLock(path)
	if err != nil {
		var le *LockedError
		if errors.As(err, &le) {
			if le.PID > 0 {
				return nil, fmt.Errorf("%w: pid %d holds %s", ErrBusy, le.PID, path)
			}
			return nil, fmt.Errorf("%w: %s is held", ErrBusy, path)
		}
		return nil, err
	}
	return lk, nil
}

// beginStep starts a maintenance step on a log open for writing: it takes
// the step's in-process mutex and its role's lock file (<log>/<role>.lock),
// so one goroutine of one process runs it at a time. what names the step in
// errors ("seal log"); end releases both.
func (l *Log) beginStep(what string, mu *sync.Mutex, role string) (end func(), err error) {
	if err := l.checkOpen(); err != nil {
		return nil, err
	}
	if l.mode == ReadOnly {
		return nil, fmt.Errorf("%s %s: %w", what, l.dir, ErrReadOnly)
	}
	mu.Lock()
	lk, err := l.roleLock(role)
	if err != nil {
		mu.Unlock()
		return nil, fmt.Errorf("%s %s: %w", what, l.dir, err)
	}
	return func() { lk.release(); mu.Unlock() }, nil
}

// recoverIfIdle runs seal recovery when no process is sealing.
func (l *Log) recoverIfIdle(ctx context.Context) error {
	l.sealMu.Lock()
	defer l.sealMu.Unlock()
	lk, err := l.roleLock("seal")
	if errors.Is(err, ErrBusy) {
		return nil // the live sealer recovers at its next pass
	}
	if err != nil {
		return err
	}
	defer lk.release()
	return l.recoverSeals(ctx)
}

// sealName matches the names seal gives files: <start>-<end>-<token>.parquet.
var sealName = regexp.MustCompile(`^[0-9]+-[0-9]+-[0-9a-f]{16}\.parquet$`)

// recoverSeals undoes seals that recorded an intent but never completed:
// their file (whole or partial) is deleted and the intent dropped, so the
// range is sealed again under a fresh name. It also deletes seal-named files
// that neither a completion nor an intent mentions. The caller holds
// seal.lock, so no live sealer owns any of them.
func (l *Log) recoverSeals(ctx context.Context) error {
	type intent struct {
		name       string
		start, end int64
	}
	var intents []intent
	rows, err := l.rdb.QueryContext(ctx, `SELECT name, start_offset, end_offset FROM seal_intents`)
	if err != nil {
		return fmt.Errorf("read seal intents: %w", err)
	}
	for rows.Next() {
		var it intent
		if err := rows.Scan(&it.name, &it.start, &it.end); err != nil {
			rows.Close()
			return fmt.Errorf("read seal intents: %w", err)
		}
		intents = append(intents, it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read seal intents: %w", err)
	}
	dir := filepath.Join(l.dir, filesDir)
	for _, it := range intents {
		// Delete the file before forgetting the intent: the reverse order
		// would leave a file nobody knows about if we crash in between.
		if err := os.Remove(filepath.Join(dir, it.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s left by an interrupted seal of [%d,%d): %w", it.name, it.start, it.end, err)
		}
		if err := durable.SyncDir(dir); err != nil {
			return err
		}
		err := l.writeTx(ctx, func(c *sql.Conn) error {
			_, err := c.ExecContext(ctx, `DELETE FROM seal_intents WHERE name = ?`, it.name)
			return err
		})
		if err != nil {
			return fmt.Errorf("drop intent of interrupted seal %s: %w", it.name, err)
		}
	}
	// Seal-named files no record mentions: a seal only creates a file after
	// recording its intent, so these come from outside or from a bug; they
	// would otherwise stay forever.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	known, err := l.fileNames(ctx)
	if err != nil {
		return err
	}
	removed := false
	for _, e := range entries {
		if !e.Type().IsRegular() || !sealName.MatchString(e.Name()) || known[e.Name()] {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove orphaned file %s: %w", e.Name(), err)
		}
		removed = true
	}
	if removed {
		return durable.SyncDir(dir)
	}
	return nil
}

// fileNames returns the names of completed files, of pending seal and
// compaction intents, and of files queued for deletion: every name under
// files/ that some record accounts for.
func (l *Log) fileNames(ctx context.Context) (map[string]bool, error) {
	return l.nameSet(ctx, `SELECT name FROM files UNION ALL SELECT name FROM seal_intents
		UNION ALL SELECT name FROM compact_intents UNION ALL SELECT path FROM delete_queue WHERE tier = 'local'`)
}

// sealInput is the buffered rows one seal takes: whole groups from start.
type sealInput struct {
	start, end int64
	groups     []bufGroup
	jsonBytes  int64
}

type bufGroup struct {
	first, n, ts int64
	rows         []byte // packed
}

// sealFile seals one file's rows: intent, file, completion. Column
// statistics are computed beside the write.
func (l *Log) sealFile(ctx context.Context, in sealInput, rec arrow.RecordBatch) error {
	var stats []byte
	var statsErr error
	statsDone := make(chan struct{})
	go func() {
		defer close(statsDone)
		stats, statsErr = colstats.Compute(l.sch, rec.Columns()[2:])
	}()
	defer func() { <-statsDone }()
	name, err := newFileName(in.start, in.end)
	if err != nil {
		return err
	}
	// 1. The intent: the range and the name, before the file exists.
	err = l.writeTx(ctx, func(c *sql.Conn) error {
		_, err := c.ExecContext(ctx, `INSERT INTO seal_intents(name, start_offset, end_offset, created_us) VALUES (?, ?, ?, ?)`,
			name, in.start, in.end, l.now().UnixMicro())
		return err
	})
	if err != nil {
		return fmt.Errorf("record intent to seal [%d,%d): %w", in.start, in.end, err)
	}
	// 2. The file, fsynced with its directory.
	path := filepath.Join(l.dir, filesDir, name)
	size, err := parquetfile.Write(path, rec)
	if err != nil {
		// Undo now rather than at the next pass; if this fails too, the
		// next pass's recovery does it.
		_ = l.recoverSeals(context.WithoutCancel(ctx))
		return fmt.Errorf("write %s for [%d,%d): %w", name, in.start, in.end, err)
	}
	if err := l.atCrashPoint("seal:written"); err != nil {
		return err // the intent stays, as after a crash
	}
	<-statsDone
	if statsErr != nil {
		_ = l.recoverSeals(context.WithoutCancel(ctx))
		return statsErr
	}
	// 3. The completion, dropping the intent in the same transaction.
	minTS, maxTS := tsRange(in.groups)
	err = l.writeTx(ctx, func(c *sql.Conn) error {
		// Never complete a file overlapping one already completed: seal.lock
		// makes this impossible, and this check keeps it so.
		end, ok, err := sealedEnd(ctx, c, l.tiers)
		if err != nil {
			return err
		}
		if ok && end != in.start {
			return fmt.Errorf("the files now end at %d, not %d: another sealer completed this range", end, in.start)
		}
		res, err := c.ExecContext(ctx, `DELETE FROM seal_intents WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("the intent for %s is gone: a recovery undid this seal", name)
		}
		_, err = c.ExecContext(ctx, `INSERT INTO files(start_offset, end_offset, name, row_count, arrow_bytes, json_bytes, file_bytes, min_ts, max_ts, stats, sealed_us)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			in.start, in.end, name, rec.NumRows(), parquetfile.ArrowBytes(rec), in.jsonBytes, size, minTS, maxTS, string(stats), l.now().UnixMicro())
		return err
	})
	if err != nil {
		_ = l.recoverSeals(context.WithoutCancel(ctx))
		return fmt.Errorf("record completion of %s for [%d,%d): %w", name, in.start, in.end, err)
	}
	return nil
}

// sealStart returns where the next seal starts (the end of the completed
// files) and the Arrow bytes per canonical byte the last file measured (the
// canonical size over-estimates, keys being spelled out, so 1 is safe).
func (l *Log) sealStart(ctx context.Context) (start int64, ratio float64, err error) {
	var arrowB, jsonB sql.NullInt64
	err = l.rdb.QueryRowContext(ctx, `SELECT arrow_bytes, json_bytes FROM files ORDER BY start_offset DESC LIMIT 1`).Scan(&arrowB, &jsonB)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, 0, fmt.Errorf("read file records: %w", err)
	}
	end, ok, err := sealedEnd(ctx, l.rdb, l.tiers)
	if err != nil {
		return 0, 0, err
	}
	if ok {
		start = end
	} else if err := l.rdb.QueryRowContext(ctx, `SELECT v FROM meta WHERE k = 'start_offset'`).Scan(&start); err != nil {
		return 0, 0, fmt.Errorf("read start offset: %w", err)
	}
	ratio = 1.0
	if arrowB.Valid && jsonB.Valid && jsonB.Int64 > 0 {
		ratio = float64(arrowB.Int64) / float64(jsonB.Int64)
	}
	return start, ratio, nil
}

// readSealInput reads whole groups from start until their estimated Arrow
// size reaches the target. ok=false means there is nothing to seal: an
// empty buffer, or (without flush) less than a target.
func (l *Log) readSealInput(ctx context.Context, start int64, ratio float64, flush bool) (in sealInput, ok bool, err error) {
	in.start = start
	target := l.cfg.TargetSealBytes
	// One statement, so one snapshot of the buffer.
	rows, err := l.rdb.QueryContext(ctx, `SELECT first, n, ts, rows FROM groups WHERE first >= ? ORDER BY first`, in.start)
	if err != nil {
		return in, false, fmt.Errorf("read buffer: %w", err)
	}
	defer rows.Close()
	expect := in.start
	var est float64
	full := false
	for rows.Next() {
		var g bufGroup
		if err := rows.Scan(&g.first, &g.n, &g.ts, &g.rows); err != nil {
			return in, false, fmt.Errorf("read buffer: %w", err)
		}
		if g.first != expect {
			return in, false, fmt.Errorf("the buffer holds offset %d where %d was expected (files end at %d): %w", g.first, expect, in.start, ErrCorrupt)
		}
		expect += g.n
		in.groups = append(in.groups, g)
		in.jsonBytes += int64(len(g.rows))
		est += float64(len(g.rows))*ratio + 16*float64(g.n)
		if est >= float64(target) {
			full = true
			break
		}
	}
	if err := rows.Err(); err != nil {
		return in, false, fmt.Errorf("read buffer: %w", err)
	}
	in.end = expect
	if len(in.groups) == 0 || (!full && !flush) {
		return in, false, nil
	}
	return in, true, nil
}

// buildRecord converts the input's canonical rows into one Arrow record
// with the file schema, ordered by sort_by (then offset).
func (l *Log) buildRecord(in sealInput) (arrow.RecordBatch, error) {
	mem := memory.DefaultAllocator
	bld := array.NewRecordBuilder(mem, l.fileSc)
	defer bld.Release()
	n := int(in.end - in.start)
	bld.Reserve(n)
	offB := bld.Field(0).(*array.Int64Builder)
	tsB := bld.Field(1).(*array.Int64Builder)
	decl := bld.Fields()[2:]
	var rowB *array.StringBuilder
	if l.sch.IsAny() {
		rowB = decl[0].(*array.StringBuilder)
	}
	for _, g := range in.groups {
		u := unpacker{b: g.rows}
		off := g.first
		for {
			row, ok, err := u.next()
			if err != nil {
				return nil, fmt.Errorf("buffer group at offset %d: %w", g.first, err)
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
		return nil, fmt.Errorf("built %d rows for [%d,%d): %w", rec.NumRows(), in.start, in.end, ErrCorrupt)
	}
	if len(l.cfg.SortBy) == 0 {
		return rec, nil
	}
	sorted, err := parquetfile.Sort(rec, l.sortColumns())
	rec.Release()
	return sorted, err
}

// sortColumns returns the file-schema indexes of the sort_by columns.
func (l *Log) sortColumns() []int {
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

// newFileName names a sealed file by its range and a fresh random token, so
// a retried seal of the same range never writes over an earlier attempt.
func newFileName(start, end int64) (string, error) {
	return fmt.Sprintf("%d-%d-%s.parquet", start, end, newToken()), nil
}

// newToken returns 16 fresh random hex digits. crypto/rand never fails on
// the platforms streamcast runs on (it would crash the process first).
func newToken() string {
	var tok [8]byte
	_, _ = rand.Read(tok[:])
	return hex.EncodeToString(tok[:])
}

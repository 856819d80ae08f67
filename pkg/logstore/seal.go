package logstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/streamcast/streamcast/pkg/logstore/parquetfile"
)

// Seal turns buffered rows into Parquet files under files/. Without flush it
// seals only whole targets (TargetSealBytes of Arrow data each) and leaves a
// partial one buffered; with flush it seals everything buffered. It returns
// the number of rows sealed. Rows stay in the buffer until Clean.
//
// Seal first recovers any seal a crashed process left half done. It runs
// under seal.lock: when another process is sealing this log it returns an
// error wrapping ErrBusy.
func (l *Log) Seal(ctx context.Context, flush bool) (sealed int64, err error) {
	end, err := begin(l, "seal log", RoleSeal)
	if err != nil {
		return 0, err
	}
	defer end()
	if err := l.RecoverSeals(ctx); err != nil {
		return 0, fmt.Errorf("seal log %s: %w", l.Dir(), err)
	}
	sealed, err = sealAll(ctx, l, flush)
	if err != nil {
		return sealed, fmt.Errorf("seal log %s: %w", l.Dir(), err)
	}
	return sealed, nil
}

// built is one file's worth of rows, converted and ready to write.
type built struct {
	in  Buffered
	err error
}

// sealAll seals file after file in a two-stage pipeline: while one file is
// written and fsynced, the next one's rows are read and converted. Each
// file still goes through intent, write and completion in order, and the
// files are completed in offset order, each starting where the previous
// one ended.
func sealAll(ctx context.Context, l *Log, flush bool) (sealed int64, err error) {
	start, ratio, err := sealStart(ctx, l)
	if err != nil {
		return 0, err
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan built, 1)
	go func() {
		defer close(ch)
		for {
			in, ok, err := l.ReadBuffered(pctx, start, ratio, flush)
			if err != nil {
				ch <- built{err: err}
				return
			}
			if !ok {
				return
			}
			// The ratio is read before the record is handed on: the
			// writer releases it, and a released record has no bytes.
			start = in.End
			if in.JSONBytes > 0 {
				ratio = float64(parquetfile.ArrowBytes(in.Rec)) / float64(in.JSONBytes)
			}
			select {
			case ch <- built{in: in}:
			case <-pctx.Done():
				in.Rec.Release()
				return
			}
		}
	}()
	defer func() {
		cancel()
		for b := range ch { // let the producer finish; free what it built
			if b.in.Rec != nil {
				b.in.Rec.Release()
			}
		}
	}()
	for b := range ch {
		if b.err != nil {
			return sealed, b.err
		}
		err := sealFile(ctx, l, b.in)
		b.in.Rec.Release()
		if err != nil {
			return sealed, err
		}
		sealed += b.in.End - b.in.Start
	}
	return sealed, ctx.Err()
}

// sealFile seals one file's rows: intent, file, completion. Column
// statistics are computed beside the write.
func sealFile(ctx context.Context, l *Log, in Buffered) error {
	rec := in.Rec
	waitStats := statsBeside(l.Schema(), rec)
	defer func() { _, _ = waitStats() }()
	name := newFileName(in.Start, in.End)
	// 1. The intent: the range and the name, before the file exists.
	err := addSealIntent(ctx, l, name, in.Start, in.End)
	if err != nil {
		return fmt.Errorf("record intent to seal [%d,%d): %w", in.Start, in.End, err)
	}
	// 2. The file, fsynced with its directory.
	path := filepath.Join(l.FilesDir(), name)
	size, err := parquetfile.Write(path, rec)
	if err != nil {
		// Undo now rather than at the next pass; if this fails too, the
		// next pass's recovery does it.
		_ = l.RecoverSeals(context.WithoutCancel(ctx))
		return fmt.Errorf("write %s for [%d,%d): %w", name, in.Start, in.End, err)
	}
	if err := l.atCrashPoint("seal:written"); err != nil {
		return err // the intent stays, as after a crash
	}
	stats, statsErr := waitStats()
	if statsErr != nil {
		_ = l.RecoverSeals(context.WithoutCancel(ctx))
		return statsErr
	}
	// 3. The completion, dropping the intent in the same transaction.
	err = l.update(ctx, func(c *recordTx) error {
		// Never complete a file overlapping one already completed: seal.lock
		// makes this impossible, and this check keeps it so.
		end, ok, err := c.sealedEnd(ctx)
		if err != nil {
			return err
		}
		if ok && end != in.Start {
			// A restore's hole between the files and this one is no overlap.
			hs, err := readHoles(ctx, c)
			if err != nil {
				return err
			}
			if end < in.Start && holeSpans(hs, end, in.Start) {
				ok = false
			}
		}
		if ok && end != in.Start {
			return fmt.Errorf("the files now end at %d, not %d: another sealer completed this range", end, in.Start)
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
			in.Start, in.End, name, rec.NumRows(), parquetfile.ArrowBytes(rec), in.JSONBytes, size, in.MinTS, in.MaxTS, string(stats), l.Now().UnixMicro())
		return err
	})
	if err != nil {
		_ = l.RecoverSeals(context.WithoutCancel(ctx))
		return fmt.Errorf("record completion of %s for [%d,%d): %w", name, in.Start, in.End, err)
	}
	return nil
}

// sealStart returns where the next seal starts (the end of the completed
// files) and the Arrow bytes per canonical byte the last file measured (the
// canonical size over-estimates, keys being spelled out, so 1 is safe).
func sealStart(ctx context.Context, l *Log) (start int64, ratio float64, err error) {
	var arrowB, jsonB sql.NullInt64
	err = l.records().QueryRowContext(ctx, `SELECT arrow_bytes, json_bytes FROM files ORDER BY start_offset DESC LIMIT 1`).Scan(&arrowB, &jsonB)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, 0, fmt.Errorf("read file records: %w", err)
	}
	end, err := l.sealedEnd(ctx)
	if err != nil {
		return 0, 0, err
	}
	if end > 0 {
		start = end
	} else if err := l.records().QueryRowContext(ctx, `SELECT v FROM meta WHERE k = 'start_offset'`).Scan(&start); err != nil {
		return 0, 0, fmt.Errorf("read start offset: %w", err)
	}
	ratio = 1.0
	if arrowB.Valid && jsonB.Valid && jsonB.Int64 > 0 {
		ratio = float64(arrowB.Int64) / float64(jsonB.Int64)
	}
	return start, ratio, nil
}

// addSealIntent records the intent to create name under files/ for
// [start, end), before the file exists; seal recovery undoes it.
func addSealIntent(ctx context.Context, l *Log, name string, start, end int64) error {
	return l.update(ctx, func(c *recordTx) error {
		_, err := c.ExecContext(ctx, `INSERT INTO seal_intents(name, start_offset, end_offset, created_us) VALUES (?, ?, ?, ?)`,
			name, start, end, l.Now().UnixMicro())
		return err
	})
}

// newFileName names a sealed or merged file by its range and a fresh
// random token, so a retried seal of the same range never writes over an
// earlier attempt.
func newFileName(start, end int64) string {
	return fmt.Sprintf("%d-%d-%s.parquet", start, end, NewToken())
}

// begin takes the roles of a step (Acquire), wording a refusal with what
// the step is ("seal log").
func begin(l *Log, what string, roles ...Role) (end func(), err error) {
	end, err = l.Acquire(roles...)
	if errors.Is(err, ErrClosed) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, l.Dir(), err)
	}
	return end, nil
}

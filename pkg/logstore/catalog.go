package logstore

import (
	"context"
	"database/sql"
	"fmt"
)

// The questions answered from buffer.db's records alone (counts, summaries,
// holes, status) are plain functions over a querier; the methods here open
// the read transaction they run in.

// readTx runs fn in one read transaction on buffer.db.
func (l *Log) readTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := l.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}

// CountRows returns how many rows the log holds in [from, to), counted
// from the records of its tiers, never by reading rows (countRows).
// Rows below the floor (SetFloor) are not counted, nor the ranges recorded
// in the holes table. from > to is a *RangeError.
func (l *Log) CountRows(ctx context.Context, from, to int64) (n int64, err error) {
	if err := l.checkOpen(); err != nil {
		return 0, err
	}
	if from > to {
		return 0, &RangeError{From: from, To: to}
	}
	if from == to {
		return 0, nil
	}
	err = l.readTx(ctx, func(tx *sql.Tx) error {
		n, err = countRows(ctx, tx, l.tiers, from, to)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("count rows of log %s in [%d,%d): %w", l.dir, from, to, err)
	}
	return n, nil
}

// Summary rolls up the log's file records (local and published) and the
// stamps of its buffered groups at or above from, or the floor when that
// is higher (a floor about to be set counts before SetFloor), in one read
// transaction. Records wholly below go uncounted.
func (l *Log) Summary(ctx context.Context, from int64) (s Summary, err error) {
	if err := l.checkOpen(); err != nil {
		return s, err
	}
	err = l.readTx(ctx, func(tx *sql.Tx) error {
		var end, floor int64
		if err := tx.QueryRowContext(ctx, `SELECT `+endSQL+`, coalesce((SELECT v FROM meta WHERE k = 'floor'), 0)`).Scan(&end, &floor); err != nil {
			return err
		}
		s, err = summarize(ctx, tx, l.sch, l.tiers, max(floor, from), end)
		return err
	})
	if err != nil {
		return Summary{}, fmt.Errorf("summarise log %s: %w", l.dir, err)
	}
	return s, nil
}

// Status reads the log's tiers in one read transaction.
func (l *Log) Status(ctx context.Context) (st Status, err error) {
	if err := l.checkOpen(); err != nil {
		return st, err
	}
	err = l.readTx(ctx, func(tx *sql.Tx) error {
		var end int64
		if err := tx.QueryRowContext(ctx, `SELECT `+endSQL).Scan(&end); err != nil {
			return err
		}
		st, err = readStatus(ctx, tx, l.tiers, end, l.now())
		return err
	})
	if err != nil {
		return st, fmt.Errorf("read status of log %s: %w", l.dir, err)
	}
	return st, nil
}

// Holes returns the offset ranges recorded as skipped on purpose, oldest
// first. A restore resumes past a fence and records the range it jumped
// over (docs/design.md §4.8): no tier holds a row there, ever, so reads
// skip it, counts leave it out, and seal and publish step over it.
func (l *Log) Holes(ctx context.Context) ([]Span, error) {
	if err := l.checkOpen(); err != nil {
		return nil, err
	}
	hs, err := readHoles(ctx, l.rdb)
	if err != nil {
		return nil, fmt.Errorf("read the holes of log %s: %w", l.dir, err)
	}
	return hs, nil
}

// HoleEnd returns the end of the recorded hole holding off, and ok=false
// when off lies in none: a subscriber asking for an offset inside a hole
// starts at its end.
func (l *Log) HoleEnd(ctx context.Context, off int64) (end int64, ok bool, err error) {
	hs, err := l.Holes(ctx)
	if err != nil {
		return 0, false, err
	}
	h, ok := holeAt(hs, off)
	return h.End, ok, nil
}

// HeldEnd returns the end of the rows held below end: end itself, or the
// start of the recorded holes that reach up to end. Right after a restore
// the log's next offset sits at the end of its hole, and a replay that
// announced end as its last offset would keep a reader waiting for rows
// that never were.
func (l *Log) HeldEnd(ctx context.Context, end int64) (int64, error) {
	hs, err := l.Holes(ctx)
	if err != nil {
		return 0, err
	}
	return heldEnd(hs, end), nil
}

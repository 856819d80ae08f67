package logstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Fence closes the log to writes for good and returns its end, the offset
// a successor log starts at. From then on Append fails with a
// *FencedError (errors.Is ErrFenced) naming that end, in this process and
// after any Close, Open or crash: the fence is one row of buffer.db's meta,
// written in the same transaction that reads the end. Reads and every
// maintenance step go on as before. Fencing a fenced log returns the end
// it was fenced at. Only the Writer may fence: it is the one process that
// appends (I7), so no append can slip in after the end was read.
func (l *Log) Fence(ctx context.Context) (end int64, err error) {
	if l.mode != Writer {
		return 0, fmt.Errorf("fence log %s (open as %s): %w", l.dir, l.mode, ErrNotWriter)
	}
	// wmu is held from reading the end to setting l.fenced, so no Append
	// of this handle commits in between.
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.fenced != 0 {
		return l.fenced, nil
	}
	err = l.writeTxLocked(ctx, func(c *sql.Conn) error {
		if err := c.QueryRowContext(ctx, `SELECT `+endSQL).Scan(&end); err != nil {
			return err
		}
		_, err := c.ExecContext(ctx, `INSERT INTO meta(k, v) VALUES ('fenced_end', ?)`, end)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("fence log %s: %w", l.dir, err)
	}
	l.fenced = end
	return end, nil
}

// ImportMarks stores the exactly-once marks of a predecessor log in this
// one, so a publisher resumes on it without a duplicate. It replaces the
// log's marks with marks in one transaction, and refuses a log that has
// ever held a row: marks are only carried into a new log, before its
// first append. Rerunning it with the same marks is a no-op.
func (l *Log) ImportMarks(ctx context.Context, marks []Mark) error {
	err := l.writeTx(ctx, func(c *sql.Conn) error {
		var start, next int64
		err := c.QueryRowContext(ctx, `SELECT (SELECT v FROM meta WHERE k = 'start_offset'), `+endSQL).Scan(&start, &next)
		if err != nil {
			return err
		}
		if next != start {
			return fmt.Errorf("the log holds offsets [%d,%d); marks are carried only into a log that never held a row", start, next)
		}
		if _, err := c.ExecContext(ctx, `DELETE FROM marks`); err != nil {
			return err
		}
		for _, m := range marks {
			if m.Publisher == "" {
				return errors.New("a mark names no publisher")
			}
			_, err := c.ExecContext(ctx, `INSERT INTO marks(publisher, last_seq, last_offset) VALUES (?, ?, ?)`, m.Publisher, m.LastSeq, m.LastOffset)
			if err != nil {
				return fmt.Errorf("store mark of publisher %q: %w", m.Publisher, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("import %d marks into log %s: %w", len(marks), l.dir, err)
	}
	return nil
}

package logstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ErrNotContiguous reports an AppendAt whose first offset is not the log's
// next one: the rows would leave a gap or repeat offsets the log holds (I1).
var ErrNotContiguous = errors.New("rows do not continue the log at its next offset")

// AppendAt commits rows that another log assigned offsets and stamps to, in
// one SQLite transaction (fsynced before it returns, I3): row i takes offset
// first+i and stamp ts[i]. It is how a relay mirrors its upstream's log with
// the same offsets and stamps. first must be the log's next offset, so a
// mirrored log stays dense (I1): anything else is refused with
// ErrNotContiguous and commits nothing. Consecutive rows with one stamp are
// stored as one group, as the upstream committed them.
//
// Like Append, it does not validate the rows (the upstream did), and only
// the Writer may call it.
func (l *Log) AppendAt(ctx context.Context, first int64, rows [][]byte, ts []int64) error {
	if l.mode != Writer {
		return fmt.Errorf("append to log %s (open as %s): %w", l.dir, l.mode, ErrNotWriter)
	}
	if len(rows) == 0 || len(rows) != len(ts) {
		return fmt.Errorf("append to log %s: %d rows with %d stamps; give at least one row and one stamp per row", l.dir, len(rows), len(ts))
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.fenced != 0 {
		return &FencedError{Dir: l.dir, End: l.fenced}
	}
	if first != l.next {
		return fmt.Errorf("append %d rows at offset %d to log %s, whose next offset is %d: %w", len(rows), first, l.dir, l.next, ErrNotContiguous)
	}
	n := int64(len(rows))
	err := l.writeTxLocked(ctx, func(c *sql.Conn) error {
		for i := 0; i < len(rows); {
			j := i + 1
			for j < len(rows) && ts[j] == ts[i] {
				j++
			}
			l.packed = Append(l.packed[:0], rows[i:j])
			if _, err := l.stmts.insGroup.ExecContext(ctx, first+int64(i), j-i, ts[i], l.packed); err != nil {
				return err
			}
			i = j
		}
		return nil // no next_offset write: the last group is the end (endSQL)
	})
	if err != nil {
		if rerr := l.reloadNext(); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("append %d rows to log %s at offset %d: %w", n, l.dir, first, err)
	}
	l.next = first + n
	return nil
}

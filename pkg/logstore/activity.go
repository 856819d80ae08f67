package logstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// ReadActivity reads the Activity of the log in dir (Read). A
// directory with neither buffer.db nor its WAL index is an error wrapping
// fs.ErrNotExist; one whose WAL index is being rebuilt just now, one
// wrapping ErrInFlux.
func ReadActivity(dir string) (Activity, error) {
	return Read(dir, BufferFile)
}

// NextDue returns the earliest time a path in the log's delete queue comes
// due (ok=false when the queue is empty): a clean step before it deletes
// nothing from the queue, one at or after it does.
func (l *Log) NextDue(ctx context.Context) (due time.Time, ok bool, err error) {
	if err := l.checkOpen(); err != nil {
		return time.Time{}, false, err
	}
	if !l.tiers {
		return time.Time{}, false, nil
	}
	var us sql.NullInt64
	if err := l.rdb.QueryRowContext(ctx, `SELECT min(due_us) FROM delete_queue`).Scan(&us); err != nil {
		return time.Time{}, false, fmt.Errorf("read the delete queue of log %s: %w", l.dir, err)
	}
	if !us.Valid {
		return time.Time{}, false, nil
	}
	return time.UnixMicro(us.Int64), true, nil
}

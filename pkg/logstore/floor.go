package logstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
)

// FloorFor returns the retention floor for a cutoff: the smallest offset
// that may hold a row whose streamcast_ts is newer than cutoffTS (µs), so
// that every row below it is at most cutoffTS old. It reads the ts spans
// of the file records (local and published) and the stamps of the
// buffered groups, never a row: inside a file it cannot tell rows apart,
// so a file holding one newer row keeps the floor at its start (the floor
// errs on the side of keeping rows). With nothing newer it is the log's
// end. It never returns less than the floor already set, nor the log's
// start.
func (l *Log) FloorFor(ctx context.Context, cutoffTS int64) (floor int64, err error) {
	if err := l.checkOpen(); err != nil {
		return 0, err
	}
	var cur int64
	err = l.readTx(ctx, func(tx *sql.Tx) error {
		newer, ok, err := firstNewer(ctx, tx, l.tiers, cutoffTS)
		if err == nil {
			err = tx.QueryRowContext(ctx, `SELECT `+endSQL+`, coalesce((SELECT v FROM meta WHERE k = 'floor'), 0)`).Scan(&floor, &cur)
		}
		if ok {
			floor = newer
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("find the floor of log %s: %w", l.dir, err)
	}
	return max(floor, cur, l.cfg.Start), nil
}

// SetFloor raises the log's retention floor to floor, for good: from then
// on Extent's earliest is at least floor, a scan below it is a
// *RangeError, and CountRows counts nothing below it. The rows below stay
// in their tiers, unserved, until DeleteBelow queues them. A floor never
// moves down: a lower one than the floor set is a no-op. A floor past the
// log's end is refused.
func (l *Log) SetFloor(ctx context.Context, floor int64) error {
	err := l.writeTx(ctx, func(c *sql.Conn) error {
		var end int64
		if err := c.QueryRowContext(ctx, `SELECT `+endSQL).Scan(&end); err != nil {
			return err
		}
		if floor > end {
			return fmt.Errorf("floor %d is past %d, the log's end; a floor is at most the end", floor, end)
		}
		_, err := c.ExecContext(ctx, `INSERT INTO meta(k, v) VALUES ('floor', ?1)
			ON CONFLICT(k) DO UPDATE SET v = max(v, ?1)`, floor)
		return err
	})
	if err != nil {
		return fmt.Errorf("set the floor of log %s to %d: %w", l.dir, floor, err)
	}
	return nil
}

// Policy returns the log's config as this handle applies it: what the
// log stores, with the retention, grace and S3 settings of this process's
// overrides (a maintenance process's flags) laid over it. Config returns
// what the log stores.
func (l *Log) Policy() Config {
	c := l.policy()
	c.SortBy = slices.Clone(c.SortBy)
	return c
}

// Floor returns the retention floor SetFloor set; 0 when none.
func (l *Log) Floor(ctx context.Context) (int64, error) {
	if err := l.checkOpen(); err != nil {
		return 0, err
	}
	var v int64
	if err := l.rdb.QueryRowContext(ctx, `SELECT coalesce((SELECT v FROM meta WHERE k = 'floor'), 0)`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read the floor of log %s: %w", l.dir, err)
	}
	return v, nil
}

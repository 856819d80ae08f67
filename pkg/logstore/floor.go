package logstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/apache/iceberg-go"

	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
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
	q := `SELECT min(s) FROM (
		SELECT min(start_offset) AS s FROM files WHERE max_ts > ?1
		UNION ALL SELECT min(first) FROM groups WHERE ts > ?1`
	if l.tiers {
		q += ` UNION ALL SELECT min(start_offset) FROM published WHERE max_ts > ?1`
	}
	q += `)`
	tx, err := l.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, fmt.Errorf("find the floor of log %s: %w", l.dir, err)
	}
	defer tx.Rollback()
	var newer sql.NullInt64
	var end, cur int64
	err = tx.QueryRowContext(ctx, q, cutoffTS).Scan(&newer)
	if err == nil {
		err = tx.QueryRowContext(ctx, `SELECT (SELECT v FROM meta WHERE k = 'next_offset'), coalesce((SELECT v FROM meta WHERE k = 'floor'), 0)`).Scan(&end, &cur)
	}
	if err != nil {
		return 0, fmt.Errorf("find the floor of log %s: %w", l.dir, err)
	}
	floor = end
	if newer.Valid {
		floor = newer.Int64
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
		if err := c.QueryRowContext(ctx, `SELECT v FROM meta WHERE k = 'next_offset'`).Scan(&end); err != nil {
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

// floorSet returns the retention floor SetFloor set; 0 when none.
func (l *Log) floorSet(ctx context.Context) (int64, error) {
	if err := l.checkOpen(); err != nil {
		return 0, err
	}
	var v int64
	if err := l.rdb.QueryRowContext(ctx, `SELECT coalesce((SELECT v FROM meta WHERE k = 'floor'), 0)`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read the floor of log %s: %w", l.dir, err)
	}
	return v, nil
}

// Deleted is what DeleteBelow took out.
type Deleted struct {
	LocalFiles     int64 // local files queued for deletion
	PublishedFiles int64 // published files taken out of the table and queued for deletion
	BufferedRows   int64 // buffered rows deleted
}

// DeleteBelow takes out what lies wholly below floor, which must not be
// above the floor set (SetFloor), so no reader is served what goes:
//
//   - local files ending at or below it leave their records and wait in
//     the delete queue for LocalDeleteGrace; a local file the published
//     table does not hold yet stays (it is the only copy, and the table
//     must stay one run of offsets), and goes at a later call;
//   - buffered groups ending at or below it that a file holds are deleted
//     (a group not yet sealed is left to seal, so the files stay
//     contiguous);
//   - published files ending at or below it are removed from the table in
//     one commit, and their objects queued for DeleteGrace; clean-published
//     deletes them once no kept snapshot references them. A published file
//     that a remaining local file overlaps stays (a later publish may swap
//     it), and so does the last published file: it anchors where seal and
//     publish resume.
//
// A file straddling the floor stays until it is wholly below one. It runs
// under clean.lock and publish.lock (no publish pass may plan against
// records it removes) and returns ErrBusy while another process holds
// either. Each part is idempotent: after a crash, the next call finishes
// (a commit that landed is found by its files missing from the table).
func (l *Log) DeleteBelow(ctx context.Context, floor int64) (Deleted, error) {
	var d Deleted
	done, err := l.beginStep("delete below the floor of log", &l.evictMu, "clean")
	if err != nil {
		return d, err
	}
	defer done()
	l.publishMu.Lock()
	defer l.publishMu.Unlock()
	plk, err := l.roleLock("publish")
	if err != nil {
		return d, fmt.Errorf("delete below the floor of log %s: %w", l.dir, err)
	}
	defer plk.release()
	set, err := l.floorSet(ctx)
	if err != nil {
		return d, err
	}
	if floor > set {
		return d, fmt.Errorf("delete below %d in log %s: the floor is %d; set the floor first, so no reader is served what is being deleted", floor, l.dir, set)
	}
	pol := l.policy()
	var doomed []pubFile // published files below the floor
	err = l.writeTx(ctx, func(c *sql.Conn) error {
		pubs, err := publishedFiles(ctx, c)
		if err != nil {
			return err
		}
		var pe int64 // what the table holds ends here; nothing below start when none
		if len(pubs) > 0 {
			pe = pubs[len(pubs)-1].end
		}
		files, err := localFiles(ctx, c)
		if err != nil {
			return err
		}
		busy, err := intentRanges(ctx, c, `SELECT start_offset, end_offset FROM compact_intents
			UNION ALL SELECT start_offset, end_offset FROM publish_intents`)
		if err != nil {
			return err
		}
		var names []string
		kept := files
		for _, f := range files {
			if f.end > floor || f.end > pe || overlaps(busy, f.start, f.end) {
				break
			}
			if _, err := c.ExecContext(ctx, `DELETE FROM files WHERE start_offset = ?`, f.start); err != nil {
				return err
			}
			names = append(names, f.name)
			kept = kept[1:]
		}
		if err := enqueue(ctx, c, tierLocal, l.now().Add(pol.LocalDeleteGrace), fmt.Sprintf("below the retention floor %d", floor), names...); err != nil {
			return err
		}
		d.LocalFiles = int64(len(names))
		end, ok, err := sealedEnd(ctx, c, l.tiers)
		if err != nil || !ok {
			return err
		}
		below := min(floor, end)
		if err := c.QueryRowContext(ctx, `SELECT coalesce(sum(n), 0) FROM groups WHERE first + n <= ?`, below).Scan(&d.BufferedRows); err != nil {
			return err
		}
		if _, err := c.ExecContext(ctx, `DELETE FROM groups WHERE first + n <= ?`, below); err != nil {
			return err
		}
		bound := floor
		if len(kept) > 0 {
			bound = min(bound, kept[0].start)
		}
		for i, p := range pubs {
			if p.end > bound || i == len(pubs)-1 {
				break
			}
			doomed = append(doomed, p)
		}
		return nil
	})
	if err != nil {
		return Deleted{}, fmt.Errorf("delete below the floor %d in log %s: %w", floor, l.dir, err)
	}
	if len(doomed) == 0 {
		return d, nil
	}
	if err := l.trimPublished(ctx, floor, doomed); err != nil {
		return d, fmt.Errorf("delete below the floor %d in log %s: %w", floor, l.dir, err)
	}
	d.PublishedFiles = int64(len(doomed))
	return d, nil
}

// trimPublished removes doomed from the published table in one commit
// (those it still references: a rerun after a crash finds the commit
// landed), then drops their records and queues their objects. The caller
// holds publish.lock.
func (l *Log) trimPublished(ctx context.Context, floor int64, doomed []pubFile) error {
	pt, err := l.published()
	if err != nil {
		return err
	}
	if err := l.commitTrim(ctx, pt, floor, doomed); err != nil {
		return err
	}
	if err := l.atCrashPoint("delete-below:committed"); err != nil {
		return err
	}
	pol := l.policy()
	return l.writeTx(ctx, func(c *sql.Conn) error {
		paths := make([]string, len(doomed))
		for i, p := range doomed {
			if _, err := c.ExecContext(ctx, `DELETE FROM published WHERE start_offset = ? AND path = ?`, p.start, p.path); err != nil {
				return err
			}
			paths[i] = p.path
		}
		return enqueue(ctx, c, tierPublished, l.now().Add(pol.DeleteGrace), fmt.Sprintf("below the retention floor %d", floor), paths...)
	})
}

// commitTrim commits the removal of whichever of doomed the table's
// current snapshot still reads.
func (l *Log) commitTrim(ctx context.Context, pt *warehouse.Table, floor int64, doomed []pubFile) error {
	release, err := l.commitLock(ctx)
	if err != nil {
		return err
	}
	defer release()
	tbl, err := pt.Load(ctx)
	if err != nil {
		return err
	}
	if err := pt.Owned(tbl, l.owner()); err != nil {
		return err
	}
	if err := pt.ClearClaim(tbl.MetadataLocation()); err != nil {
		return err
	}
	cur, err := pt.CurrentFiles(ctx, tbl)
	if err != nil {
		return err
	}
	var dels []string
	for _, p := range doomed {
		if cur.Has(pt, p.path) {
			dels = append(dels, p.path)
		}
	}
	if len(dels) == 0 {
		return nil
	}
	summary := iceberg.Properties{warehouse.SummaryOffsets: fmt.Sprintf("[%d,%d)", doomed[0].start, doomed[len(doomed)-1].end)}
	txn := tbl.NewTransaction()
	if err := txn.ReplaceDataFiles(ctx, dels, nil, summary); err != nil {
		return fmt.Errorf("stage the removal of %d files below the floor %d: %w", len(dels), floor, err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		return fmt.Errorf("commit the removal of %d files below the floor %d to %s: %w", len(dels), floor, pt.Location(), err)
	}
	return nil
}

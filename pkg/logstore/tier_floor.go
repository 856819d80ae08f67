package logstore

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

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
// records it removes) and returns logstore.ErrBusy while another process holds
// either. Each part is idempotent: after a crash, the next call finishes
// (a commit that landed is found by its files missing from the table).
func (l *Log) DeleteBelow(ctx context.Context, floor int64) (Deleted, error) {
	var d Deleted
	done, err := begin(l, "delete below the floor of log", RoleClean, RolePublish)
	if err != nil {
		return d, err
	}
	defer done()
	set, err := l.Floor(ctx)
	if err != nil {
		return d, err
	}
	if floor > set {
		return d, fmt.Errorf("delete below %d in log %s: the floor is %d; set the floor first, so no reader is served what is being deleted", floor, l.Dir(), set)
	}
	pol := l.Policy()
	var doomed []pubFile // published files below the floor
	err = l.update(ctx, func(c *recordTx) error {
		pubs, err := publishedFiles(ctx, c)
		if err != nil {
			return err
		}
		var pe int64 // what the table holds ends here; nothing below start when none
		if len(pubs) > 0 {
			pe = pubs[len(pubs)-1].end
		}
		files, busy, err := filesAndBusy(ctx, c)
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
		if err := enqueue(ctx, c, tierLocal, l.Now().Add(pol.LocalDeleteGrace), fmt.Sprintf("below the retention floor %d", floor), names...); err != nil {
			return err
		}
		d.LocalFiles = int64(len(names))
		end, ok, err := c.sealedEnd(ctx)
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
		return Deleted{}, fmt.Errorf("delete below the floor %d in log %s: %w", floor, l.Dir(), err)
	}
	if len(doomed) == 0 {
		return d, nil
	}
	if err := trimPublished(ctx, l, floor, doomed); err != nil {
		return d, fmt.Errorf("delete below the floor %d in log %s: %w", floor, l.Dir(), err)
	}
	d.PublishedFiles = int64(len(doomed))
	return d, nil
}

// trimPublished removes doomed from the published table in one commit
// (those it still references: a rerun after a crash finds the commit
// landed), then drops their records and queues their objects. The caller
// holds publish.lock.
func trimPublished(ctx context.Context, l *Log, floor int64, doomed []pubFile) error {
	pt, err := l.PublishedTable()
	if err != nil {
		return err
	}
	if err := commitTrim(ctx, l, pt, floor, doomed); err != nil {
		return err
	}
	if err := l.atCrashPoint("delete-below:committed"); err != nil {
		return err
	}
	pol := l.Policy()
	return l.update(ctx, func(c *recordTx) error {
		paths := make([]string, len(doomed))
		for i, p := range doomed {
			if _, err := c.ExecContext(ctx, `DELETE FROM published WHERE start_offset = ? AND path = ?`, p.start, p.path); err != nil {
				return err
			}
			paths[i] = p.path
		}
		return enqueue(ctx, c, tierPublished, l.Now().Add(pol.DeleteGrace), fmt.Sprintf("below the retention floor %d", floor), paths...)
	})
}

// commitTrim commits the removal of whichever of doomed the table's
// current snapshot still reads.
func commitTrim(ctx context.Context, l *Log, pt *warehouse.Table, floor int64, doomed []pubFile) error {
	release, err := l.CommitLock(ctx)
	if err != nil {
		return err
	}
	defer release()
	tbl, err := pt.Load(ctx)
	if err != nil {
		return err
	}
	if err := pt.Owned(tbl, l.TableOwner()); err != nil {
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

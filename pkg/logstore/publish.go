package logstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// pubChange is one file a publish pass adds to the table: a local file,
// uploaded under a fresh name, replacing the published files it covers
// (none when it only extends the table).
type pubChange struct {
	f        localFile
	path     string    // its location in the table
	replaces []pubFile // published files covering part of its range, swapped out by the same commit
}

// Publish pushes local files into the log's published Iceberg table, in
// one commit. Without flush it pushes finished files only (compacted to
// TargetFileBytes), with flush every local file; either way the table
// always holds a contiguous prefix of the log's offsets, each exactly once.
// It returns the number of rows the table gained.
//
// A file that compaction built over already-published files replaces them
// in the same commit (a swap), so the table never holds a range twice,
// never straddles one file across the published end, and never loses one.
//
// Before uploading, Publish records its intent (each file's range and the
// location it gets, under a fresh token); after the commit it records the
// files as published and raises published_through. A pass interrupted
// between the two is reconciled by the next one: the commit carries the
// pass's token in a table property, so the next pass can tell whether it
// landed. Uploads of a pass that never committed are deleted through the
// queue. Publish runs under publish.lock: when another process is
// publishing this log it returns an error wrapping logstore.ErrBusy.
func (l *Log) Publish(ctx context.Context, flush bool) (published int64, err error) {
	end, err := begin(l, "publish log", RolePublish)
	if err != nil {
		return 0, err
	}
	defer end()
	pt, err := l.PublishedTable()
	if err != nil {
		return 0, err
	}
	return publishPass(ctx, l, pt, flush)
}

// publishPass is one Publish pass; the caller holds publish.lock.
func publishPass(ctx context.Context, l *Log, pt *warehouse.Table, flush bool) (published int64, err error) {
	if err := removeStaleMarks(l); err != nil {
		return 0, err
	}
	if err := reconcilePublish(ctx, l, pt); err != nil {
		return 0, fmt.Errorf("publish log %s: %w", l.Dir(), err)
	}
	if err := ensureTable(ctx, l, pt); err != nil {
		return 0, fmt.Errorf("publish log %s: %w", l.Dir(), err)
	}
	pass := NewToken()
	changes, err := planPublish(ctx, l, pt, pass, flush)
	if err != nil {
		return 0, fmt.Errorf("publish log %s: %w", l.Dir(), err)
	}
	if len(changes) == 0 {
		return 0, nil
	}
	n, err := push(ctx, l, pt, pass, changes)
	if err != nil {
		return 0, fmt.Errorf("publish log %s [%d,%d): %w", l.Dir(), changes[0].f.start, changes[len(changes)-1].f.end, err)
	}
	return n, nil
}

// ensureTable makes sure the table exists and is this log's.
func ensureTable(ctx context.Context, l *Log, pt *warehouse.Table) error {
	release, err := l.CommitLock(ctx)
	if err != nil {
		return err
	}
	defer release()
	if _, err := pt.Load(ctx); errors.Is(err, warehouse.ErrNoTable) {
		through, err := l.PublishedThrough(ctx)
		if err != nil {
			return err
		}
		if through > 0 {
			// Making a new, empty table here would hide that the history
			// published so far is gone (I8).
			return fmt.Errorf("the published table at %s is missing, but this log published offsets through %d there: restore the table from a backup, or move the log's published prefix; nothing more is published until then: %w", pt.Location(), through, ErrCorrupt)
		}
	}
	_, err = pt.Ensure(ctx, l.TableOwner())
	return err
}

// push uploads the planned files, commits them and records the commit.
// On an error the intents stay for the next pass to reconcile: nothing is
// undone here, exactly as if the process had died.
func push(ctx context.Context, l *Log, pt *warehouse.Table, pass string, changes []pubChange) (int64, error) {
	for _, ch := range changes {
		src := filepath.Join(l.FilesDir(), ch.f.name)
		if err := pt.Upload(ctx, src, ch.path); err != nil {
			return 0, fmt.Errorf("upload %s to %s: %w", ch.f.name, ch.path, err)
		}
	}
	if err := l.atCrashPoint("publish:uploaded"); err != nil {
		return 0, err
	}
	through, err := commitPublish(ctx, l, pt, pass, changes)
	if err != nil {
		return 0, err
	}
	if err := l.atCrashPoint("publish:committed"); err != nil {
		return 0, err
	}
	if err := recordPublish(ctx, l, pass, through); err != nil {
		return 0, err
	}
	var n int64
	for _, ch := range changes {
		lo := ch.f.start
		if len(ch.replaces) > 0 {
			lo = ch.replaces[len(ch.replaces)-1].end
		}
		n += ch.f.end - lo
	}
	return n, nil
}

// planPublish chooses what this pass pushes and records the intents, in
// one transaction, so compaction cannot replace a chosen file meanwhile
// without seeing the intent.
func planPublish(ctx context.Context, l *Log, pt *warehouse.Table, pass string, flush bool) ([]pubChange, error) {
	var changes []pubChange
	pol := l.Policy()
	err := l.update(ctx, func(c *recordTx) error {
		changes = nil
		pubs, err := publishedFiles(ctx, c)
		if err != nil {
			return err
		}
		locals, err := localFiles(ctx, c)
		if err != nil {
			return err
		}
		compacting, err := spans(ctx, c, `SELECT start_offset, end_offset FROM compact_intents`)
		if err != nil {
			return err
		}
		var pe int64 // the end of what the table holds
		if len(pubs) > 0 {
			pe = pubs[len(pubs)-1].end
		} else if err := c.QueryRowContext(ctx, `SELECT v FROM meta WHERE k = 'start_offset'`).Scan(&pe); err != nil {
			return fmt.Errorf("read start offset: %w", err)
		}
		hs, err := readHoles(ctx, c)
		if err != nil {
			return err
		}
	files:
		for _, f := range locals {
			if f.start > pe && holeSpans(hs, pe, f.start) {
				pe = f.start // a restore's hole: the table goes on after it
			}
			// Without flush only finished files go: a smaller one would be
			// rewritten by compaction and pushed again. A file compaction is
			// merging right now waits for the merge, except on a flush,
			// which must push everything.
			ready := flush || (f.fileBytes >= pol.TargetFileBytes && !overlaps(compacting, f.start, f.end))
			switch {
			case f.end <= pe: // wholly published, maybe as several smaller files
				cov := covering(pubs, f.start, f.end)
				if len(cov) == 1 && cov[0].start == f.start && cov[0].end == f.end {
					continue // this very range is published
				}
				if !tiles(cov, f.start, f.end) {
					return fmt.Errorf("local file %s [%d,%d) cuts across the published files %v: refusing to publish anything until this is resolved: %w", f.name, f.start, f.end, cov, ErrCorrupt)
				}
				if ready {
					changes = append(changes, pubChange{f: f, replaces: cov})
				}
			case f.start < pe: // straddles the published end: a swap that also extends
				cov := covering(pubs, f.start, pe)
				if !tiles(cov, f.start, pe) {
					return fmt.Errorf("local file %s [%d,%d) cuts across the published files %v: refusing to publish anything until this is resolved: %w", f.name, f.start, f.end, cov, ErrCorrupt)
				}
				if !ready {
					break files // the table holds a prefix: nothing after an unready file goes
				}
				changes = append(changes, pubChange{f: f, replaces: cov})
				pe = f.end
			case f.start != pe:
				return fmt.Errorf("the local files resume at %d but the published table ends at %d: offsets [%d,%d) are in neither: %w", f.start, pe, pe, f.start, ErrCorrupt)
			case !ready:
				break files
			default:
				changes = append(changes, pubChange{f: f})
				pe = f.end
			}
		}
		now := l.Now().UnixMicro()
		for i := range changes {
			f := changes[i].f
			changes[i].path = pt.DataPath(fmt.Sprintf("%d-%d-%s.parquet", f.start, f.end, NewToken()))
			_, err := c.ExecContext(ctx, `INSERT INTO publish_intents(path, pass, name, start_offset, end_offset, row_count, file_bytes, min_ts, max_ts, stats, created_us)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, changes[i].path, pass, f.name, f.start, f.end, f.rows, f.fileBytes, f.minTS, f.maxTS, f.stats, now)
			if err != nil {
				return fmt.Errorf("record intent to publish %s: %w", f.name, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return changes, nil
}

// covering returns the published files inside [start, end).
func covering(pubs []pubFile, start, end int64) []pubFile {
	var out []pubFile
	for _, p := range pubs {
		if p.end > start && p.start < end {
			out = append(out, p)
		}
	}
	return out
}

// tiles reports whether files cover exactly [start, end), end to end.
func tiles(files []pubFile, start, end int64) bool {
	next := start
	for _, p := range files {
		if p.start != next {
			return false
		}
		next = p.end
	}
	return next == end && len(files) > 0
}

// commitPublish makes the one commit of a pass: the new files added, the
// files they replace removed, and the pass token and published-through
// stamped in the table properties, all in one new metadata version, with
// the exactly-once marks as of the new published_through written beside
// the table's metadata and named by PropMarks. It returns the new
// published_through.
func commitPublish(ctx context.Context, l *Log, pt *warehouse.Table, pass string, changes []pubChange) (int64, error) {
	release, err := l.CommitLock(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	tbl, err := pt.Ensure(ctx, l.TableOwner())
	if err != nil {
		return 0, err
	}
	recorded, err := l.PublishedThrough(ctx)
	if err != nil {
		return 0, err
	}
	if err := checkThrough(pt, tbl, recorded); err != nil {
		return 0, err
	}
	if err := pt.ClearClaim(tbl.MetadataLocation()); err != nil {
		return 0, err
	}
	var adds, dels []string
	through := recorded
	lo, hi := changes[0].f.start, changes[0].f.end
	for _, ch := range changes {
		adds = append(adds, ch.path)
		for _, r := range ch.replaces {
			dels = append(dels, r.path)
		}
		through = max(through, ch.f.end-1)
		lo, hi = min(lo, ch.f.start), max(hi, ch.f.end)
	}
	marks, err := writeMarks(ctx, l, pt, pass, through)
	if err != nil {
		return 0, err
	}
	props := iceberg.Properties{warehouse.PropPass: pass, warehouse.PropPublishedThrough: strconv.FormatInt(through, 10), warehouse.PropMarks: marks}
	for k, v := range warehouse.TableProperties() {
		props[k] = v
	}
	summary := iceberg.Properties{warehouse.SummaryOffsets: fmt.Sprintf("[%d,%d)", lo, hi), warehouse.PropPass: pass}
	txn := tbl.NewTransaction()
	if err := txn.SetProperties(props); err != nil {
		return 0, fmt.Errorf("stage table properties: %w", err)
	}
	if len(dels) > 0 {
		err = txn.ReplaceDataFiles(ctx, dels, adds, summary)
	} else {
		err = txn.AddFiles(ctx, adds, summary, false)
	}
	if err != nil {
		return 0, fmt.Errorf("stage %d new and %d replaced files: %w", len(adds), len(dels), err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit to %s: %w", pt.Location(), err)
	}
	return through, nil
}

// checkThrough compares what the table says it holds with what buffer.db
// recorded. They agree except between a commit and its record, which
// reconcilePublish settles before anything else runs; a disagreement past
// that means the table was changed behind the log's back, and publishing
// more could duplicate or skip rows.
func checkThrough(pt *warehouse.Table, tbl *table.Table, recorded int64) error {
	v := tbl.Properties()[warehouse.PropPublishedThrough]
	got, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("the table at %s has %s=%q, not an offset: %w", pt.Location(), warehouse.PropPublishedThrough, v, ErrCorrupt)
	}
	if got != recorded {
		return fmt.Errorf("the table at %s says it holds offsets through %d, but this log recorded %d as published: it was changed by something other than this log's publish role; refusing to publish until they agree: %w", pt.Location(), got, recorded, ErrCorrupt)
	}
	return nil
}

// recordPublish records a landed pass: its files replace the published
// records they cover, published_through rises, the intents go, and the
// replaced objects are queued for deletion (clean-published deletes them
// once no kept snapshot references them, after the grace period).
func recordPublish(ctx context.Context, l *Log, pass string, through int64) error {
	pol := l.Policy()
	err := l.update(ctx, func(c *recordTx) error {
		rows, err := c.QueryContext(ctx, `SELECT path, name, start_offset, end_offset, row_count, file_bytes, min_ts, max_ts, stats
			FROM publish_intents WHERE pass = ? ORDER BY start_offset`, pass)
		if err != nil {
			return err
		}
		type intent struct {
			path, name, stats       string
			start, end, rows, bytes int64
			minTS, maxTS            int64
		}
		var intents []intent
		for rows.Next() {
			var it intent
			if err := rows.Scan(&it.path, &it.name, &it.start, &it.end, &it.rows, &it.bytes, &it.minTS, &it.maxTS, &it.stats); err != nil {
				rows.Close()
				return err
			}
			intents = append(intents, it)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(intents) == 0 {
			return fmt.Errorf("the intents of publish pass %s are gone", pass)
		}
		pubs, err := publishedFiles(ctx, c)
		if err != nil {
			return err
		}
		now := l.Now()
		for _, it := range intents {
			var replaced []string
			for _, p := range covering(pubs, it.start, it.end) {
				if _, err := c.ExecContext(ctx, `DELETE FROM published WHERE start_offset = ?`, p.start); err != nil {
					return err
				}
				replaced = append(replaced, p.path)
			}
			if err := enqueue(ctx, c, tierPublished, now.Add(pol.DeleteGrace), "replaced by "+filepath.Base(it.path), replaced...); err != nil {
				return err
			}
			_, err := c.ExecContext(ctx, `INSERT INTO published(start_offset, end_offset, name, path, row_count, file_bytes, min_ts, max_ts, stats, published_us)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, it.start, it.end, it.name, it.path, it.rows, it.bytes, it.minTS, it.maxTS, it.stats, now.UnixMicro())
			if err != nil {
				return fmt.Errorf("record %s as published: %w", it.path, err)
			}
		}
		if _, err := c.ExecContext(ctx, `UPDATE meta SET v = max(v, ?) WHERE k = 'published_through'`, through); err != nil {
			return err
		}
		if err := pruneMarkHistory(ctx, c, through); err != nil {
			return err
		}
		_, err = c.ExecContext(ctx, `DELETE FROM publish_intents WHERE pass = ?`, pass)
		return err
	})
	if err != nil {
		return fmt.Errorf("record publish pass %s: %w", pass, err)
	}
	return nil
}

// reconcilePublish settles the intents a crashed or failed pass left: if
// its commit landed (the table carries its token), the pass is recorded as
// if it had finished; otherwise its uploads are queued for deletion and the
// intents dropped, and the next plan starts afresh.
func reconcilePublish(ctx context.Context, l *Log, pt *warehouse.Table) error {
	var pass string
	err := l.records().QueryRowContext(ctx, `SELECT pass FROM publish_intents LIMIT 1`).Scan(&pass)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read publish intents: %w", err)
	}
	tbl, err := pt.Load(ctx)
	landed := false
	switch {
	case errors.Is(err, warehouse.ErrNoTable):
	case err != nil:
		return fmt.Errorf("cannot tell whether publish pass %s landed: %w", pass, err)
	default:
		landed = tbl.Properties()[warehouse.PropPass] == pass
	}
	if landed {
		through, err := strconv.ParseInt(tbl.Properties()[warehouse.PropPublishedThrough], 10, 64)
		if err != nil {
			return fmt.Errorf("the table at %s has no valid %s: %w", pt.Location(), warehouse.PropPublishedThrough, ErrCorrupt)
		}
		return recordPublish(ctx, l, pass, through)
	}
	pol := l.Policy()
	return l.update(ctx, func(c *recordTx) error {
		rows, err := c.QueryContext(ctx, `SELECT path FROM publish_intents`)
		if err != nil {
			return err
		}
		var paths []string
		for rows.Next() {
			var p string
			if err := rows.Scan(&p); err != nil {
				rows.Close()
				return err
			}
			paths = append(paths, p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// Nothing references these uploads; the grace only spares a
		// reader that cannot exist. The drain still checks the table.
		if err := enqueue(ctx, c, tierPublished, l.Now().Add(pol.DeleteGrace), "upload of an abandoned publish pass", paths...); err != nil {
			return err
		}
		_, err = c.ExecContext(ctx, `DELETE FROM publish_intents`)
		return err
	})
}

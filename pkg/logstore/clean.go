package logstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/streamcast/streamcast/internal/durable"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// Cleaned counts what one clean pass did.
type Cleaned struct {
	BufferRows int64 // buffered rows evicted (files hold them)
	LocalFiles int   // local files taken out of the log's records (published, past retention)
	Deleted    int   // files or objects deleted from the delete queue
	Expired    int   // snapshots of the published table expired
}

// Clean evicts buffered rows that files hold, takes local files out of the
// log when the published table holds their rows and they are past
// StagingRetention (or the local files exceed StagingMaxBytes), and
// deletes local files whose turn in the delete queue has come.
//
// It never deletes the only copy of a row: a local file goes only when the
// published table's recorded extent covers it, a buffered row only when a
// file holds it. Files leave the records first and are unlinked only after
// LocalDeleteGrace, so a reader that listed them finishes (a later reader
// finds the rows in the published table). Clean runs under clean.lock:
// when another process is cleaning this log it returns an error wrapping
// logstore.ErrBusy.
func (l *Log) Clean(ctx context.Context) (Cleaned, error) {
	return clean(ctx, l, "clean log", evictFiles)
}

// clean is a clean pass: evict the buffered rows files hold, take local
// files out of the records with evict, then drain the local delete queue,
// under clean.lock.
func clean(ctx context.Context, l *Log, what string, evict func(context.Context, *Log) (int, error)) (Cleaned, error) {
	var done Cleaned
	end, err := begin(l, what, RoleClean)
	if err != nil {
		return done, err
	}
	defer end()
	if done.BufferRows, err = evictBuffer(ctx, l); err != nil {
		return done, err
	}
	if done.LocalFiles, err = evict(ctx, l); err != nil {
		return done, fmt.Errorf("%s %s: %w", what, l.Dir(), err)
	}
	if done.Deleted, err = drainLocal(ctx, l); err != nil {
		return done, fmt.Errorf("%s %s: %w", what, l.Dir(), err)
	}
	return done, nil
}

// evictFiles takes published local files out of the records, oldest
// first, and queues them for deletion.
func evictFiles(ctx context.Context, l *Log) (n int, err error) {
	pol := l.Policy()
	now := l.Now()
	err = l.update(ctx, func(c *recordTx) error {
		n = 0
		pubs, err := publishedFiles(ctx, c)
		if err != nil || len(pubs) == 0 {
			return err
		}
		pe := pubs[len(pubs)-1].end
		asIs := map[Span]bool{}
		for _, p := range pubs {
			asIs[Span{Start: p.start, End: p.end}] = true
		}
		files, busy, total, err := stagedFiles(ctx, c)
		if err != nil {
			return err
		}
		cutoff := now.Add(-pol.StagingRetention).UnixMicro()
		var gone []string
		for _, f := range files {
			if f.end > pe || overlaps(busy, f.start, f.end) {
				break // not (wholly) published: this is the only copy
			}
			// A file compaction may still grow, or one publish still owes a
			// swap for (the table holds its rows in smaller files), stays
			// for its retention-free life, unless space runs out.
			settled := f.fileBytes >= pol.TargetFileBytes && asIs[Span{Start: f.start, End: f.end}]
			old := f.sealedUS < cutoff
			if !(old && settled) && total <= pol.StagingMaxBytes {
				break
			}
			if _, err := c.ExecContext(ctx, `DELETE FROM files WHERE start_offset = ?`, f.start); err != nil {
				return err
			}
			gone = append(gone, f.name)
			total -= f.fileBytes
		}
		n = len(gone)
		return enqueue(ctx, c, tierLocal, now.Add(pol.LocalDeleteGrace), "published and past retention", gone...)
	})
	return n, err
}

// CleanCache is Clean for a log kept as a cache of another server's
// stream (a relay's, docs/design.md §4.1): nothing publishes it, since the
// upstream's table is the history, so its retention cannot wait for the
// published table. It evicts buffered rows that files hold, then takes
// local files out of the log, oldest first, once they are past
// StagingRetention or while the local files exceed StagingMaxBytes, and
// deletes those whose turn in the delete queue has come.
//
// Taking a file out drops its rows for good, so the same transaction
// raises the log's floor (Log.SetFloor) to the end of the last file taken
// out: from its commit a reader asking below it is refused with the
// numbers, never served a hole; one that listed the files before reads
// them until LocalDeleteGrace. A file a compaction is rewriting stays.
// It runs under clean.lock, as Clean does.
func (l *Log) CleanCache(ctx context.Context) (Cleaned, error) {
	return clean(ctx, l, "clean cache log", expireCacheFiles)
}

// expireCacheFiles takes a cache log's local files past retention out of
// the records, oldest first, raises the floor above them and queues them
// for deletion.
func expireCacheFiles(ctx context.Context, l *Log) (n int, err error) {
	pol := l.Policy()
	now := l.Now()
	err = l.update(ctx, func(c *recordTx) error {
		n = 0
		files, busy, total, err := stagedFiles(ctx, c)
		if err != nil || len(files) == 0 {
			return err
		}
		cutoff := now.Add(-pol.StagingRetention).UnixMicro()
		var gone []string
		var floor int64
		for _, f := range files {
			if overlaps(busy, f.start, f.end) {
				break // a compaction is rewriting it: the next pass decides
			}
			if f.sealedUS >= cutoff && total <= pol.StagingMaxBytes {
				break
			}
			if _, err := c.ExecContext(ctx, `DELETE FROM files WHERE start_offset = ?`, f.start); err != nil {
				return err
			}
			gone = append(gone, f.name)
			total -= f.fileBytes
			floor = f.end
		}
		if len(gone) == 0 {
			return nil
		}
		// The floor and the records move together: no reader sees the
		// files gone with the floor still below them.
		if _, err := c.ExecContext(ctx, `INSERT INTO meta(k, v) VALUES ('floor', ?1)
			ON CONFLICT(k) DO UPDATE SET v = max(v, ?1)`, floor); err != nil {
			return fmt.Errorf("raise the floor to %d: %w", floor, err)
		}
		// Seals cut at group boundaries and evictBuffer already dropped
		// what files hold; this only catches a group a crash left behind.
		if _, err := c.ExecContext(ctx, `DELETE FROM groups WHERE first + n <= ?`, floor); err != nil {
			return err
		}
		n = len(gone)
		return enqueue(ctx, c, tierLocal, now.Add(pol.LocalDeleteGrace), fmt.Sprintf("cache past retention, below the floor %d", floor), gone...)
	})
	return n, err
}

// stagedFiles is filesAndBusy with the files' total size on disk, which
// StagingMaxBytes bounds.
func stagedFiles(ctx context.Context, c *recordTx) (files []localFile, busy []Span, total int64, err error) {
	files, busy, err = filesAndBusy(ctx, c)
	for _, f := range files {
		total += f.fileBytes
	}
	return files, busy, total, err
}

// drainLocal deletes the local files whose time in the delete queue is up:
// first the file, then its queue row (the other order could leak a file).
// A name some record still mentions is never deleted.
func drainLocal(ctx context.Context, l *Log) (int, error) {
	now := l.Now().UnixMicro()
	due, err := queuePaths(ctx, l.records(), tierLocal, now)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	known, err := liveNames(ctx, l)
	if err != nil {
		return 0, err
	}
	dir := l.FilesDir()
	var done []string
	for _, name := range due {
		if !known[name] && !strings.ContainsAny(name, `/\`) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return 0, fmt.Errorf("delete %s: %w", name, err)
			}
		}
		done = append(done, name)
	}
	if err := durable.SyncDir(dir); err != nil {
		return 0, err
	}
	return len(done), forget(ctx, l, tierLocal, done)
}

// liveNames returns the names under files/ that a record other than the
// delete queue mentions.
func liveNames(ctx context.Context, l *Log) (map[string]bool, error) {
	return nameSet(ctx, l.records(), `SELECT name FROM files UNION ALL SELECT name FROM seal_intents
		UNION ALL SELECT name FROM compact_intents UNION ALL SELECT name FROM publish_intents`)
}

// queuePaths returns the queued paths of a tier due by now (µs).
func queuePaths(ctx context.Context, q querier, tier string, now int64) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT path FROM delete_queue WHERE tier = ? AND due_us <= ? ORDER BY due_us`, tier, now)
	if err != nil {
		return nil, fmt.Errorf("read the delete queue: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// forget drops queue rows.
func forget(ctx context.Context, l *Log, tier string, paths []string) error {
	return l.update(ctx, func(c *recordTx) error {
		for _, p := range paths {
			if _, err := c.ExecContext(ctx, `DELETE FROM delete_queue WHERE tier = ? AND path = ?`, tier, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// CleanPublished maintains the published table: it expires snapshots
// older than PublishedSnapshotRetention (keeping the current one), queues
// the manifests and data files only those snapshots referenced, queues
// metadata files no version references any more (leftovers of commits
// that crashed), and deletes queued objects whose time is up.
//
// It never lists and deletes: a listing only proposes candidates, and every
// object is checked against the table's live metadata (and buffer.db's
// records) right before it is deleted; a referenced one waits another
// DeleteGrace. Objects are deleted only after DeleteGrace in the queue, so
// a reader that planned a scan on an older snapshot finishes. It runs under
// clean-published.lock: when another process is at it, it returns an error
// wrapping logstore.ErrBusy.
func (l *Log) CleanPublished(ctx context.Context) (Cleaned, error) {
	var done Cleaned
	end, err := begin(l, "clean published table of log", RoleCleanPublished)
	if err != nil {
		return done, err
	}
	defer end()
	pt, err := l.PublishedTable()
	if err != nil {
		return done, err
	}
	fail := func(err error) (Cleaned, error) {
		return done, fmt.Errorf("clean published table %s: %w", pt.Location(), err)
	}
	tbl, err := pt.Load(ctx)
	switch {
	case errors.Is(err, warehouse.ErrNoTable):
		tbl = nil
	case err != nil:
		return fail(err)
	default:
		if err := pt.Owned(tbl, l.TableOwner()); err != nil {
			return fail(err)
		}
		if done.Expired, err = expireSnapshots(ctx, l, pt, tbl); err != nil {
			return fail(err)
		}
		if err := sweepMetadata(ctx, l, pt); err != nil {
			return fail(err)
		}
	}
	if done.Deleted, err = drainPublished(ctx, l, pt); err != nil {
		return fail(err)
	}
	return done, nil
}

// expireSnapshots expires the snapshots past retention, queueing what only
// they referenced before the commit (a crash after it must not leak them)
// and re-stamping the queue rows after it, so the grace counts from the
// moment nothing references them.
func expireSnapshots(ctx context.Context, l *Log, pt *warehouse.Table, tbl *table.Table) (int, error) {
	pol := l.Policy()
	cutoff := l.Now().Add(-pol.PublishedSnapshotRetention).UnixMilli()
	cur := tbl.CurrentSnapshot()
	due := 0
	for _, s := range tbl.Metadata().Snapshots() {
		if s.TimestampMs < cutoff && (cur == nil || s.SnapshotID != cur.SnapshotID) {
			due++
		}
	}
	if due == 0 {
		return 0, nil
	}
	release, err := l.CommitLock(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	if tbl, err = pt.Load(ctx); err != nil { // the latest, under the lock
		return 0, err
	}
	if err := pt.ClearClaim(tbl.MetadataLocation()); err != nil {
		return 0, err
	}
	txn := tbl.NewTransaction()
	// iceberg-go measures the age against the system clock; hand it the age
	// that puts its cutoff where this handle's clock puts it, or a handle
	// whose clock runs ahead would queue files for an expiry iceberg-go
	// then does not make.
	olderThan := max(0, time.Since(time.UnixMilli(cutoff)))
	if err := txn.ExpireSnapshots(table.WithOlderThan(olderThan), table.WithRetainLast(1), table.WithPostCommit(false)); err != nil {
		return 0, fmt.Errorf("expire snapshots: %w", err)
	}
	staged, err := txn.StagedTable()
	if err != nil {
		return 0, fmt.Errorf("expire snapshots: %w", err)
	}
	before, err := pt.SnapshotRefs(ctx, tbl)
	if err != nil {
		return 0, err
	}
	after, err := pt.SnapshotRefs(ctx, staged.Table)
	if err != nil {
		return 0, err
	}
	var doomed []string
	for k, p := range before {
		if _, ok := after[k]; !ok {
			doomed = append(doomed, p)
		}
	}
	expired := len(tbl.Metadata().Snapshots()) - len(staged.Metadata().Snapshots())
	if expired == 0 {
		return 0, nil
	}
	queue := func() error {
		return l.update(ctx, func(c *recordTx) error {
			return enqueue(ctx, c, tierPublished, l.Now().Add(pol.DeleteGrace), "referenced only by expired snapshots", doomed...)
		})
	}
	if err := queue(); err != nil {
		return 0, err
	}
	if err := l.atCrashPoint("clean-published:queued"); err != nil {
		return 0, err
	}
	if _, err := txn.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit the expiry of %d snapshots: %w", expired, err)
	}
	return expired, queue()
}

// sweepMetadata queues metadata files that no version of the table
// references and that are older than DeleteGrace: what commits that crashed
// or lost a race left behind. Only names Iceberg writers use are considered.
//
// It runs under commit.lock: every commit writes its manifests and
// metadata under that lock, so what is unreferenced while it is held is
// not part of a commit in flight; it never will be referenced again.
func sweepMetadata(ctx context.Context, l *Log, pt *warehouse.Table) error {
	pol := l.Policy()
	release, err := l.CommitLock(ctx)
	if err != nil {
		return err
	}
	defer release()
	objs, err := pt.ListMetadata()
	if err != nil {
		return fmt.Errorf("list %s: %w", pt.MetadataDir(), err)
	}
	// The live set is read after the listing: an object written after it
	// is not listed; one listed and since made live is seen live.
	tbl, err := pt.Load(ctx)
	if err != nil {
		return err
	}
	live, err := pt.Live(ctx, tbl)
	if err != nil {
		return err
	}
	old := l.Now().Add(-pol.DeleteGrace)
	var cands []string
	for _, o := range objs {
		if live.Has(pt, o.Path) || !o.ModTime.Before(old) || !metadataName(path.Base(filepath.ToSlash(o.Path))) {
			continue
		}
		cands = append(cands, o.Path)
	}
	if len(cands) == 0 {
		return nil
	}
	return l.update(ctx, func(c *recordTx) error {
		for _, p := range cands {
			_, err := c.ExecContext(ctx, `INSERT OR IGNORE INTO delete_queue(tier, path, due_us, reason) VALUES (?, ?, ?, ?)`,
				tierPublished, p, l.Now().Add(pol.DeleteGrace).UnixMicro(), "unreferenced metadata")
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// metadataName reports whether a metadata directory entry is one an
// Iceberg writer makes: metadata JSON, manifests and manifest lists, and
// the temporary and claim files of the hadoop catalog's commit; or a
// marks file a publish pass wrote beside them.
func metadataName(name string) bool {
	for _, suf := range []string{".metadata.json", ".avro", ".metadata.json.claim", "-version-hint.temp", warehouse.MarksSuffix} {
		if strings.HasSuffix(name, suf) {
			return true
		}
	}
	return false
}

// drainPublished deletes the queued published objects whose time is up
// and that nothing references: not the table's live metadata, not
// buffer.db's published records, not a publish pass in flight.
func drainPublished(ctx context.Context, l *Log, pt *warehouse.Table) (int, error) {
	pol := l.Policy()
	due, err := queuePaths(ctx, l.records(), tierPublished, l.Now().UnixMicro())
	if err != nil || len(due) == 0 {
		return 0, err
	}
	live := warehouse.LiveSet{}
	tbl, err := pt.Load(ctx)
	switch {
	case errors.Is(err, warehouse.ErrNoTable):
	case err != nil:
		return 0, err
	default:
		if pt.Norm(tbl.Location()) != pt.Norm(pt.Location()) {
			return 0, fmt.Errorf("the table's metadata says it lives at %s, not %s: refusing to delete anything", tbl.Location(), pt.Location())
		}
		if live, err = pt.Live(ctx, tbl); err != nil {
			return 0, err
		}
	}
	rows, err := l.records().QueryContext(ctx, `SELECT path FROM published UNION ALL SELECT path FROM publish_intents`)
	if err != nil {
		return 0, fmt.Errorf("read published records: %w", err)
	}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			rows.Close()
			return 0, err
		}
		live.Add(pt, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	var gone, kept []string
	var firstErr error
	for _, p := range due {
		if live.Has(pt, p) {
			kept = append(kept, p)
			continue
		}
		if err := pt.Remove(p); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("delete %s: %w", p, err)
			}
			continue
		}
		gone = append(gone, p)
	}
	if err := forget(ctx, l, tierPublished, gone); err != nil {
		return 0, err
	}
	if len(kept) > 0 {
		// Still referenced (by a snapshot not yet expired): look again
		// after another grace.
		err := l.update(ctx, func(c *recordTx) error {
			return enqueue(ctx, c, tierPublished, l.Now().Add(pol.DeleteGrace), "still referenced", kept...)
		})
		if err != nil {
			return len(gone), err
		}
	}
	return len(gone), firstErr
}

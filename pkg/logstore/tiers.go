package logstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// localFile is a local file's full record.
type localFile struct {
	start, end   int64
	name         string
	rows         int64
	arrowBytes   int64
	jsonBytes    int64
	fileBytes    int64
	minTS, maxTS int64
	stats        string
	sealedUS     int64
}

const localFileCols = `start_offset, end_offset, name, row_count, arrow_bytes, json_bytes, file_bytes, min_ts, max_ts, stats, sealed_us`

func scanLocalFiles(rows *sql.Rows) ([]localFile, error) {
	defer rows.Close()
	var out []localFile
	for rows.Next() {
		var f localFile
		if err := rows.Scan(&f.start, &f.end, &f.name, &f.rows, &f.arrowBytes, &f.jsonBytes, &f.fileBytes, &f.minTS, &f.maxTS, &f.stats, &f.sealedUS); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// localFiles returns every local file record in offset order.
func localFiles(ctx context.Context, q querier) ([]localFile, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+localFileCols+` FROM files ORDER BY start_offset`)
	if err != nil {
		return nil, fmt.Errorf("read file records: %w", err)
	}
	files, err := scanLocalFiles(rows)
	if err != nil {
		return nil, fmt.Errorf("read file records: %w", err)
	}
	return files, nil
}

// pubFile is a published data file's record.
type pubFile struct {
	start, end int64
	name, path string
}

// publishedFiles returns every published file record in offset order.
func publishedFiles(ctx context.Context, q querier) ([]pubFile, error) {
	rows, err := q.QueryContext(ctx, `SELECT start_offset, end_offset, name, path FROM published ORDER BY start_offset`)
	if err != nil {
		return nil, fmt.Errorf("read published file records: %w", err)
	}
	defer rows.Close()
	var out []pubFile
	for rows.Next() {
		var p pubFile
		if err := rows.Scan(&p.start, &p.end, &p.name, &p.path); err != nil {
			return nil, fmt.Errorf("read published file records: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// sealedEnd returns the end of what files hold, local or published: the
// offset the next seal starts at and below which buffered rows may go.
// ok=false when no file was ever made.
func sealedEnd(ctx context.Context, q querier, tiers bool) (end int64, ok bool, err error) {
	query := `SELECT max(end_offset) FROM files`
	if tiers {
		query = `SELECT max(e) FROM (SELECT max(end_offset) AS e FROM files UNION ALL SELECT max(end_offset) FROM published)`
	}
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, query).Scan(&v); err != nil {
		return 0, false, fmt.Errorf("read file records: %w", err)
	}
	return v.Int64, v.Valid, nil
}

// SealedEnd returns the end of what files hold, local or published: the
// offset the next seal starts at (0 when no file was ever made). A flushing
// publish pass waits for it to reach the end seal cut at the same boundary.
func (l *Log) SealedEnd(ctx context.Context) (int64, error) {
	if err := l.checkOpen(); err != nil {
		return 0, err
	}
	end, _, err := sealedEnd(ctx, l.rdb, l.tiers)
	return end, err
}

// publishedThrough returns the last offset the published table holds, as
// buffer.db recorded it (0 when none).
func publishedThrough(ctx context.Context, q querier) (int64, error) {
	var v int64
	if err := q.QueryRowContext(ctx, `SELECT v FROM meta WHERE k = 'published_through'`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read published_through: %w", err)
	}
	return v, nil
}

// PublishedThrough returns the last offset the published table holds, as
// the publish role last recorded it: every offset from the log's first up
// to it is in the table exactly once. 0 means nothing is published.
func (l *Log) PublishedThrough(ctx context.Context) (int64, error) {
	if err := l.checkOpen(); err != nil {
		return 0, err
	}
	if !l.tiers {
		return 0, nil
	}
	return publishedThrough(ctx, l.rdb)
}

// Tiers of the delete queue.
const (
	tierLocal     = "local"     // a name under files/
	tierPublished = "published" // a location in the published table
)

// enqueue records paths for deletion once due; a path already queued keeps
// the later of the two due times.
func enqueue(ctx context.Context, c *sql.Conn, tier string, due time.Time, reason string, paths ...string) error {
	for _, p := range paths {
		_, err := c.ExecContext(ctx, `INSERT INTO delete_queue(tier, path, due_us, reason) VALUES (?, ?, ?, ?)
			ON CONFLICT(tier, path) DO UPDATE SET due_us = max(due_us, excluded.due_us)`, tier, p, due.UnixMicro(), reason)
		if err != nil {
			return fmt.Errorf("queue %s for deletion: %w", p, err)
		}
	}
	return nil
}

// policy returns the log's configuration with the maintenance process's
// overrides applied.
func (l *Log) policy() Config {
	l.polMu.Lock()
	defer l.polMu.Unlock()
	return l.pol
}

// commitLock serialises commits to the published table between the
// processes maintaining one log (publish and clean-published both commit):
// the hadoop catalog's commit is a rename, which an object store does not
// make atomic, so two commits must never overlap. It waits for the lock
// until ctx ends, and returns the function that releases it.
func (l *Log) commitLock(ctx context.Context) (func(), error) {
	path := filepath.Join(l.dir, "commit.lock")
	for {
		lk, err := tryLock(path)
		if err == nil {
			return lk.release, nil
		}
		var le *LockedError
		if !errors.As(err, &le) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for %s (held by pid %d): %w", path, le.PID, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

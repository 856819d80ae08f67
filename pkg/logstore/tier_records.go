package logstore

import (
	"context"
	"database/sql"
	"fmt"
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

// Tiers of the delete queue.
const (
	tierLocal     = "local"     // a name under files/
	tierPublished = "published" // a location in the published table
)

// enqueue records paths for deletion once due; a path already queued keeps
// the later of the two due times.
func enqueue(ctx context.Context, c *recordTx, tier string, due time.Time, reason string, paths ...string) error {
	for _, p := range paths {
		_, err := c.ExecContext(ctx, `INSERT INTO delete_queue(tier, path, due_us, reason) VALUES (?, ?, ?, ?)
			ON CONFLICT(tier, path) DO UPDATE SET due_us = max(due_us, excluded.due_us)`, tier, p, due.UnixMicro(), reason)
		if err != nil {
			return fmt.Errorf("queue %s for deletion: %w", p, err)
		}
	}
	return nil
}

// overlaps reports whether any of rs overlaps [start, end).
func overlaps(rs []Span, start, end int64) bool {
	for _, r := range rs {
		if r.End > start && r.Start < end {
			return true
		}
	}
	return false
}

// filesAndBusy returns the local file records and the ranges a merge or a
// publish pass is working on: files there are not to be taken out.
func filesAndBusy(ctx context.Context, c *recordTx) ([]localFile, []Span, error) {
	files, err := localFiles(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	busy, err := spans(ctx, c, `SELECT start_offset, end_offset FROM compact_intents
		UNION ALL SELECT start_offset, end_offset FROM publish_intents`)
	return files, busy, err
}

package logstore

import (
	"context"
	"database/sql"
	"fmt"
)

// sealedEnd returns the end of what files hold, local or published: the
// offset the next seal starts at and below which buffered rows may go.
// ok=false when no file was ever made.
func sealedEnd(ctx context.Context, q Querier, tiers bool) (end int64, ok bool, err error) {
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

// PublishedThrough returns the last offset the published table holds, as
// the publish role last recorded it: every offset from the log's first up
// to it is in the table exactly once. 0 means nothing is published.
func (l *Log) PublishedThrough(ctx context.Context) (int64, error) {
	if err := l.checkOpen(); err != nil {
		return 0, err
	}
	var v int64
	if !l.tiers {
		return 0, nil
	}
	if err := l.rdb.QueryRowContext(ctx, `SELECT v FROM meta WHERE k = 'published_through'`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read published_through: %w", err)
	}
	return v, nil
}

// policy returns the log's configuration with the maintenance process's
// overrides applied.
func (l *Log) policy() Config {
	l.polMu.Lock()
	defer l.polMu.Unlock()
	return l.pol
}

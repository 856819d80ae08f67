package logstore

import (
	"context"
	"fmt"
)

// sealedEnd returns the end of what files hold, local or published: the
// offset the next seal starts at (0 when no file was ever made). A flushing
// publish pass waits for it to reach the end seal cut at the same boundary.
func (l *Log) sealedEnd(ctx context.Context) (int64, error) {
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

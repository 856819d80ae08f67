package logstore

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
)

// evictChunkGroups bounds one evict transaction, so an Append waiting
// behind it waits for a few hundred row deletions, never for the whole
// buffer.
const evictChunkGroups = 256

// evictBuffer deletes buffered groups that completed files now hold, in
// short transactions of at most evictChunkGroups groups, and returns the
// number of rows deleted; the caller holds clean.lock (Clean's first
// step). Seals cut only at group boundaries, so every group is either
// wholly in a file or wholly buffered.
//
// A log that replicates (a replicator has written its progress file
// beside it) keeps a row buffered until the published table holds it.
func evictBuffer(ctx context.Context, l *Log) (evicted int64, err error) {
	end, err := l.sealedEnd(ctx)
	if err != nil {
		return 0, fmt.Errorf("evict log %s: %w", l.Dir(), err)
	}
	if _, err := os.Stat(filepath.Join(l.Dir(), ReplicaProgressFile)); err == nil {
		// The log replicates: its replica is the off-box copy of every
		// row not yet published, and a restore brings back buffer.db, not
		// the local files. So a row leaves the buffer only once the
		// published table holds it (docs/design.md §4.9).
		through, err := l.PublishedThrough(ctx)
		if err != nil {
			return 0, fmt.Errorf("evict log %s: %w", l.Dir(), err)
		}
		end = min(end, through+1)
	}
	if end == 0 {
		return 0, nil
	}
	boundary := sql.NullInt64{Int64: end, Valid: true}
	for {
		var n, groups int64
		err := l.update(ctx, func(c *recordTx) error {
			var lo, hi sql.NullInt64
			// Only groups wholly below the boundary: a group straddling it
			// (which seal never makes) would stay.
			err := c.QueryRowContext(ctx, `SELECT min(first), max(first), count(*), coalesce(sum(n), 0) FROM (
				SELECT first, n FROM groups WHERE first < ?1 AND first + n <= ?1 ORDER BY first LIMIT ?2)`,
				boundary.Int64, evictChunkGroups).Scan(&lo, &hi, &groups, &n)
			if err != nil || groups == 0 {
				return err
			}
			_, err = c.ExecContext(ctx, `DELETE FROM groups WHERE first >= ? AND first <= ?`, lo.Int64, hi.Int64)
			return err
		})
		if err != nil {
			return evicted, fmt.Errorf("evict log %s below offset %d: %w", l.Dir(), boundary.Int64, err)
		}
		evicted += n
		if groups < evictChunkGroups {
			return evicted, nil
		}
		if err := ctx.Err(); err != nil {
			return evicted, err
		}
	}
}

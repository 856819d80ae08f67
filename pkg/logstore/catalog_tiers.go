package logstore

import (
	"context"
	"database/sql"
	"fmt"
)

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

// earliestOffset returns the lowest offset a tier holds, the published table
// (when tiers), a local file or the buffer, and end when none holds a row.
func earliestOffset(ctx context.Context, q querier, tiers bool, end int64) (int64, error) {
	var pmin, fmin, gmin sql.NullInt64
	var err error
	if tiers {
		err = q.QueryRowContext(ctx, `SELECT min(start_offset) FROM published`).Scan(&pmin)
	}
	if err == nil {
		err = q.QueryRowContext(ctx, `SELECT min(start_offset) FROM files`).Scan(&fmin)
	}
	if err == nil {
		err = q.QueryRowContext(ctx, `SELECT min(first) FROM groups`).Scan(&gmin)
	}
	if err != nil {
		return 0, err
	}
	earliest := end
	for _, v := range []sql.NullInt64{pmin, fmin, gmin} {
		if v.Valid && v.Int64 < earliest {
			earliest = v.Int64
		}
	}
	return earliest, nil
}

// firstNewer returns the smallest offset that may hold a row whose
// streamcast_ts is newer than cutoffTS (µs), from the ts spans of the file
// records (local, and published when tiers) and the stamps of the buffered
// groups; ok is false when nothing is newer.
func firstNewer(ctx context.Context, q querier, tiers bool, cutoffTS int64) (off int64, ok bool, err error) {
	query := `SELECT min(s) FROM (
		SELECT min(start_offset) AS s FROM files WHERE max_ts > ?1
		UNION ALL SELECT min(first) FROM groups WHERE ts > ?1`
	if tiers {
		query += ` UNION ALL SELECT min(start_offset) FROM published WHERE max_ts > ?1`
	}
	query += `)`
	var newer sql.NullInt64
	if err := q.QueryRowContext(ctx, query, cutoffTS).Scan(&newer); err != nil {
		return 0, false, err
	}
	return newer.Int64, newer.Valid, nil
}

package logstore

import (
	"context"
	"database/sql"
	"time"
)

// Status is a log's tiers at one moment, for /stats and for tests.
type Status struct {
	Start            int64   // the log's first offset (Config.Start)
	End              int64   // the next offset Append assigns (for a fenced log, the end it was fenced at)
	Fenced           bool    // Fence closed the log to writes for good
	Floor            int64   // the retention floor (SetFloor); 0 when none
	BufferedRows     int64   // rows in buffer.db (some may also be in files, until clean evicts them)
	BufferedGroups   int64   // commit groups in buffer.db
	LocalFiles       int64   // files under files/ that the log records
	LocalBytes       int64   // their size on disk
	PublishedFiles   int64   // data files of the published table, as recorded
	PublishedThrough int64   // the last offset the published table holds (0: none)
	PublishLagRows   int64   // rows committed but not yet published (a recorded hole holds none)
	PublishLagSecs   float64 // age of the oldest unpublished row (its streamcast_ts against now); 0 when none
	PendingDeletes   int64   // files and objects waiting in the delete queue
}

// readStatus reads the status of a log whose next offset is end through q,
// which should be one read transaction so the figures agree; tiers says
// whether the log keeps a published tier, now is the clock PublishLagSecs
// is measured against.
func readStatus(ctx context.Context, q querier, tiers bool, end int64, now time.Time) (Status, error) {
	st := Status{End: end}
	var err error
	row := func(query string, dst ...any) {
		if err == nil {
			err = q.QueryRowContext(ctx, query).Scan(dst...)
		}
	}
	row(`SELECT (SELECT v FROM meta WHERE k = 'start_offset'), (SELECT count(*) FROM meta WHERE k = 'fenced_end'),
		coalesce((SELECT v FROM meta WHERE k = 'floor'), 0)`, &st.Start, &st.Fenced, &st.Floor)
	row(`SELECT coalesce(sum(n), 0), count(*) FROM groups`, &st.BufferedRows, &st.BufferedGroups)
	row(`SELECT count(*), coalesce(sum(file_bytes), 0) FROM files`, &st.LocalFiles, &st.LocalBytes)
	var oldestTS sql.NullInt64
	if tiers {
		row(`SELECT count(*) FROM published`, &st.PublishedFiles)
		row(`SELECT v FROM meta WHERE k = 'published_through'`, &st.PublishedThrough)
		row(`SELECT count(*) FROM delete_queue`, &st.PendingDeletes)
	}
	if err != nil {
		return st, err
	}
	first := st.PublishedThrough + 1
	if st.PublishedThrough == 0 {
		first = st.Start
	}
	// A restore resumes past a fence and records the range it skipped as a
	// hole: no row will ever fill it, so it is nothing left to publish.
	// Counting it would report a million unpublished rows after every
	// restore and keep a stop waiting for a publish that cannot happen.
	hs, err := readHoles(ctx, q)
	if err != nil {
		return st, err
	}
	st.PublishLagRows = st.End - first - holeRows(hs, first, st.End)
	if st.PublishLagRows > 0 {
		// The first unpublished row is in a local file or still buffered.
		err := q.QueryRowContext(ctx, `SELECT min_ts FROM files WHERE end_offset > ? ORDER BY start_offset LIMIT 1`, first).Scan(&oldestTS)
		if err != nil && err != sql.ErrNoRows {
			return st, err
		}
		if !oldestTS.Valid {
			err := q.QueryRowContext(ctx, `SELECT ts FROM groups WHERE first + n > ? ORDER BY first LIMIT 1`, first).Scan(&oldestTS)
			if err != nil && err != sql.ErrNoRows {
				return st, err
			}
		}
		if oldestTS.Valid {
			st.PublishLagSecs = max(0, float64(now.UnixMicro()-oldestTS.Int64)/1e6)
		}
	}
	return st, nil
}

package logstore

import (
	"context"
	"database/sql"
	"fmt"
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
	PublishLagRows   int64   // rows committed but not yet published
	PublishLagSecs   float64 // age of the oldest unpublished row (its streamcast_ts against now); 0 when none
	PendingDeletes   int64   // files and objects waiting in the delete queue
}

// Status reads the log's tiers in one read transaction.
func (l *Log) Status(ctx context.Context) (Status, error) {
	var st Status
	if err := l.checkOpen(); err != nil {
		return st, err
	}
	tx, err := l.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return st, fmt.Errorf("read status of log %s: %w", l.dir, err)
	}
	defer tx.Rollback()
	q := func(query string, dst ...any) {
		if err == nil {
			err = tx.QueryRowContext(ctx, query).Scan(dst...)
		}
	}
	q(`SELECT `+endSQL, &st.End)
	q(`SELECT (SELECT v FROM meta WHERE k = 'start_offset'), (SELECT count(*) FROM meta WHERE k = 'fenced_end'),
		coalesce((SELECT v FROM meta WHERE k = 'floor'), 0)`, &st.Start, &st.Fenced, &st.Floor)
	q(`SELECT coalesce(sum(n), 0), count(*) FROM groups`, &st.BufferedRows, &st.BufferedGroups)
	q(`SELECT count(*), coalesce(sum(file_bytes), 0) FROM files`, &st.LocalFiles, &st.LocalBytes)
	var oldestTS sql.NullInt64
	if l.tiers {
		q(`SELECT count(*) FROM published`, &st.PublishedFiles)
		q(`SELECT v FROM meta WHERE k = 'published_through'`, &st.PublishedThrough)
		q(`SELECT count(*) FROM delete_queue`, &st.PendingDeletes)
	}
	if err != nil {
		return st, fmt.Errorf("read status of log %s: %w", l.dir, err)
	}
	first := st.PublishedThrough + 1
	if st.PublishedThrough == 0 {
		first = st.Start
	}
	st.PublishLagRows = st.End - first
	if st.PublishLagRows > 0 {
		// The first unpublished row is in a local file or still buffered.
		err := tx.QueryRowContext(ctx, `SELECT min_ts FROM files WHERE end_offset > ? ORDER BY start_offset LIMIT 1`, first).Scan(&oldestTS)
		if err != nil && err != sql.ErrNoRows {
			return st, fmt.Errorf("read status of log %s: %w", l.dir, err)
		}
		if !oldestTS.Valid {
			err := tx.QueryRowContext(ctx, `SELECT ts FROM groups WHERE first + n > ? ORDER BY first LIMIT 1`, first).Scan(&oldestTS)
			if err != nil && err != sql.ErrNoRows {
				return st, fmt.Errorf("read status of log %s: %w", l.dir, err)
			}
		}
		if oldestTS.Valid {
			st.PublishLagSecs = max(0, float64(l.now().UnixMicro()-oldestTS.Int64)/1e6)
		}
	}
	return st, nil
}

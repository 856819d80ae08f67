package logstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// PublishedFile is one data file of the published table, as a restore
// rebuilds the log's record of it from the table's manifests.
type PublishedFile struct {
	Start, End   int64  // its offsets, [Start, End)
	Name, Path   string // its file name and its location in the table
	Rows, Bytes  int64  // its row count and size on storage
	MinTS, MaxTS int64  // the bounds of its streamcast_ts
	Stats        string // column statistics (as Compute encodes them), "{}" when unknown
}

// Rebase is what a restore makes of a log whose buffer.db came from
// elsewhere (a replica, or a fresh log standing in for a lost one).
type Rebase struct {
	// LogID is the id the log must carry: the lost log's, kept (I8).
	LogID string
	// Published are the published table's data files; they replace the
	// log's published records. Through is the table's last offset.
	Published []PublishedFile
	Through   int64
	// Resume is the next offset the log assigns, past the fence; Hole is
	// the range [end held, Resume) recorded as skipped (empty for none).
	Resume int64
	Hole   Span
	// Marks, when not nil, replace the log's exactly-once marks.
	Marks []Mark
}

// ApplyRebase rewrites the log's bookkeeping for a restore, in one
// transaction: the state that belonged to the old machine goes (local file
// records, seal, merge and publish intents, the delete queue: its files
// are not here), the published records become exactly the table's files,
// buffered rows the table holds go, the next offset moves to r.Resume
// (never down, I1) and r.Hole is recorded. A rerun with the same r changes
// nothing more. Only the Writer may rebase, with no other process at the
// log (the caller holds every role).
func (l *Log) ApplyRebase(ctx context.Context, r Rebase) error {
	if l.mode != Writer {
		return fmt.Errorf("rebase log %s (open as %s): %w", l.dir, l.mode, ErrNotWriter)
	}
	if r.LogID == "" {
		return errors.New("rebase log " + l.dir + ": no log id given")
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	err := l.writeTxLocked(ctx, func(c *sql.Conn) error {
		for _, q := range []string{
			`DELETE FROM files`, `DELETE FROM seal_intents`, `DELETE FROM compact_intents`,
			`DELETE FROM publish_intents`, `DELETE FROM delete_queue`, `DELETE FROM published`,
		} {
			if _, err := c.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		var pubEnd int64
		for _, f := range r.Published {
			_, err := c.ExecContext(ctx, `INSERT INTO published(start_offset, end_offset, name, path, row_count, file_bytes, min_ts, max_ts, stats, published_us)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, f.Start, f.End, f.Name, f.Path, f.Rows, f.Bytes, f.MinTS, f.MaxTS, f.Stats, l.now().UnixMicro())
			if err != nil {
				return fmt.Errorf("record published file %s: %w", f.Path, err)
			}
			pubEnd = max(pubEnd, f.End)
		}
		if _, err := c.ExecContext(ctx, `UPDATE meta SET v = ? WHERE k = 'published_through'`, r.Through); err != nil {
			return err
		}
		// Buffered rows the table holds are its, now: a group is wholly in
		// a file or wholly buffered (seals cut at group boundaries).
		if _, err := c.ExecContext(ctx, `DELETE FROM groups WHERE first + n <= ?`, pubEnd); err != nil {
			return err
		}
		if _, err := c.ExecContext(ctx, `UPDATE meta SET v = max(v, ?) WHERE k = 'next_offset'`, r.Resume); err != nil {
			return err
		}
		if _, err := c.ExecContext(ctx, `INSERT INTO meta(k, v) VALUES ('log_id', ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v`, r.LogID); err != nil {
			return err
		}
		if r.Hole.Start < r.Hole.End {
			if _, err := c.ExecContext(ctx, `INSERT OR IGNORE INTO holes(start_offset, end_offset) VALUES (?, ?)`, r.Hole.Start, r.Hole.End); err != nil {
				return fmt.Errorf("record hole [%d,%d): %w", r.Hole.Start, r.Hole.End, err)
			}
		}
		if r.Marks != nil {
			if _, err := c.ExecContext(ctx, `DELETE FROM marks`); err != nil {
				return err
			}
			for _, m := range r.Marks {
				if _, err := c.ExecContext(ctx, `INSERT INTO marks(publisher, last_seq, last_offset) VALUES (?, ?, ?)`, m.Publisher, m.LastSeq, m.LastOffset); err != nil {
					return fmt.Errorf("store mark of publisher %q: %w", m.Publisher, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rebase log %s: %w", l.dir, err)
	}
	l.logID = r.LogID
	return l.reloadNext()
}

// PublishedFiles returns the records of the published table's data files,
// in offset order: what the log knows of each file it published or a
// restore adopted (Rebase.Published).
func (l *Log) PublishedFiles(ctx context.Context) ([]PublishedFile, error) {
	if err := l.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := l.rdb.QueryContext(ctx, `SELECT start_offset, end_offset, name, path, row_count, file_bytes, min_ts, max_ts, stats FROM published ORDER BY start_offset`)
	if err != nil {
		return nil, fmt.Errorf("read the published records of log %s: %w", l.dir, err)
	}
	defer rows.Close()
	var out []PublishedFile
	for rows.Next() {
		var f PublishedFile
		if err := rows.Scan(&f.Start, &f.End, &f.Name, &f.Path, &f.Rows, &f.Bytes, &f.MinTS, &f.MaxTS, &f.Stats); err != nil {
			return nil, fmt.Errorf("read the published records of log %s: %w", l.dir, err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the published records of log %s: %w", l.dir, err)
	}
	return out, nil
}

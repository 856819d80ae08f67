package logstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// MarksFile is what a publish pass writes beside the table: the
// exactly-once marks as they stood at the table's last offset.
type MarksFile struct {
	LogID   string      `json:"log_id"`
	Through int64       `json:"through"`
	Marks   []MarkEntry `json:"marks"`
}

// MarkEntry is one publisher's mark in a MarksFile.
type MarkEntry struct {
	Publisher  string `json:"publisher"`
	LastSeq    int64  `json:"last_seq"`
	LastOffset int64  `json:"last_offset"`
}

// writeMarks uploads the marks as of offset through beside the table's
// metadata (MarksPath) and returns its location; the pass's commit points
// the table's PropMarks at it, and sweepMetadata takes it once no commit
// does any more.
func writeMarks(ctx context.Context, l *Log, pt *warehouse.Table, pass string, through int64) (string, error) {
	marks, err := marksAsOf(ctx, l.records(), through)
	if err != nil {
		return "", err
	}
	mf := MarksFile{LogID: l.ID(), Through: through, Marks: make([]MarkEntry, 0, len(marks))}
	for _, m := range marks {
		mf.Marks = append(mf.Marks, MarkEntry{m.Publisher, m.LastSeq, m.LastOffset})
	}
	b, err := json.Marshal(mf)
	if err != nil {
		return "", err
	}
	tmp := filepath.Join(l.FilesDir(), ".marks-"+pass+".json")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return "", fmt.Errorf("write the marks file: %w", err)
	}
	defer os.Remove(tmp)
	dest := pt.MarksPath(pass)
	if err := pt.Upload(ctx, tmp, dest); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("upload the marks to %s: %w", dest, err)
	}
	return dest, nil
}

// removeStaleMarks deletes the local copies of marks files that a pass
// killed between writing and uploading one left in the log's files
// directory. Only a publish pass writes them, under publish.lock, which
// its caller holds, so none of them is in use.
func removeStaleMarks(l *Log) error {
	stale, err := filepath.Glob(filepath.Join(l.FilesDir(), ".marks-*.json"))
	if err != nil {
		return err
	}
	for _, f := range stale {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove the marks file %s a killed publish pass left: %w", f, err)
		}
	}
	return nil
}

// ReadMarks reads the marks file the table's PropMarks names; ok=false
// when the table names none (published before marks were).
func ReadMarks(pt *warehouse.Table, props map[string]string) (mf MarksFile, ok bool, err error) {
	p := props[warehouse.PropMarks]
	if p == "" {
		return mf, false, nil
	}
	f, err := pt.OpenFile(p)
	if err != nil {
		return mf, false, fmt.Errorf("open the marks file %s the table names: %w", p, err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return mf, false, fmt.Errorf("read the marks file %s: %w", p, err)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return mf, false, fmt.Errorf("read the marks file %s: %w", p, err)
	}
	if err := json.Unmarshal(b, &mf); err != nil {
		return mf, false, fmt.Errorf("the marks file %s is not valid: %w", p, err)
	}
	return mf, true, nil
}

// marksAsOf returns the exactly-once marks as they stood once offset
// through was committed, read through q: a publisher whose last row is at
// or below through has its mark; one that committed more since has the
// mark of its last row at or below through (mark_history), and one that
// committed nothing by then has none. A publish pass writes these beside
// the table, so a restore from the table alone resumes each publisher at
// exactly the rows it restores.
func marksAsOf(ctx context.Context, q querier, through int64) ([]Mark, error) {
	rows, err := q.QueryContext(ctx, `SELECT publisher, last_seq, last_offset FROM marks WHERE last_offset <= ?1
		UNION ALL
		SELECT h.publisher, h.last_seq, h.last_offset FROM mark_history h JOIN marks m ON m.publisher = h.publisher
		WHERE m.last_offset > ?1 AND h.last_offset = (SELECT max(last_offset) FROM mark_history WHERE publisher = h.publisher AND last_offset <= ?1)
		ORDER BY 1`, through)
	if err != nil {
		return nil, fmt.Errorf("read the marks as of offset %d: %w", through, err)
	}
	defer rows.Close()
	out := []Mark{}
	for rows.Next() {
		var m Mark
		if err := rows.Scan(&m.Publisher, &m.LastSeq, &m.LastOffset); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// pruneMarkHistory drops the mark history a publish pass through offset
// through no longer needs, in the caller's transaction: every row of a
// publisher whose mark is at or below through, and for the others every
// row below their last one at or below through.
func pruneMarkHistory(ctx context.Context, tx *recordTx, through int64) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM mark_history WHERE publisher IN (SELECT publisher FROM marks WHERE last_offset <= ?1)
		OR (last_offset <= ?1 AND last_offset < (SELECT max(h.last_offset) FROM mark_history h
			WHERE h.publisher = mark_history.publisher AND h.last_offset <= ?1))`, through)
	if err != nil {
		return fmt.Errorf("prune the mark history through offset %d: %w", through, err)
	}
	return nil
}

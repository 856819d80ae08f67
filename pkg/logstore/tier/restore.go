package tier

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// Table is what a restore reads of a log's published table.
type Table struct {
	// Exists is false when there is no table (nothing was ever published).
	Exists bool
	// LogID is the log the table belongs to (warehouse.PropLogID).
	LogID string
	// Through is the last offset the table holds, 0 for none.
	Through int64
	// Files are the data files of its current snapshot, in offset order.
	Files []logstore.PublishedFile
	// Marks are the exactly-once marks as of Through, when the table
	// names a marks file (HasMarks).
	Marks    MarksFile
	HasMarks bool
}

// End returns the offset after the table's last, or start when it holds
// none.
func (t Table) End(start int64) int64 {
	if len(t.Files) == 0 {
		return start
	}
	return t.Files[len(t.Files)-1].End
}

// ReadTable reads the published table at pt from its manifests: its files
// with their offsets (from the names publish gives them, checked against
// the row counts), sizes and streamcast_ts bounds, its published-through
// offset and its marks. It refuses a table whose files overlap or whose
// offsets disagree with its records, naming the file.
func ReadTable(ctx context.Context, pt *warehouse.Table) (Table, error) {
	var t Table
	tbl, err := pt.Load(ctx)
	if errors.Is(err, warehouse.ErrNoTable) {
		return t, nil
	}
	if err != nil {
		return t, err
	}
	t.Exists = true
	props := tbl.Properties()
	t.LogID = props[warehouse.PropLogID]
	if t.Through, err = strconv.ParseInt(props[warehouse.PropPublishedThrough], 10, 64); err != nil {
		return t, fmt.Errorf("the table at %s has %s=%q, not an offset: %w", pt.Location(), warehouse.PropPublishedThrough, props[warehouse.PropPublishedThrough], logstore.ErrCorrupt)
	}
	if t.Marks, t.HasMarks, err = ReadMarks(pt, props); err != nil {
		return t, err
	}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return t, nil
	}
	tsField, ok := tbl.Schema().FindFieldByName("streamcast_ts")
	if !ok {
		return t, fmt.Errorf("the table at %s has no streamcast_ts column: it is no streamcast table", pt.Location())
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return t, err
	}
	mans, err := snap.Manifests(fsys)
	if err != nil {
		return t, fmt.Errorf("read the manifest list of snapshot %d of %s: %w", snap.SnapshotID, pt.Location(), err)
	}
	for _, m := range mans {
		entries, err := m.FetchEntries(fsys, true)
		if err != nil {
			return t, fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
		}
		for _, e := range entries {
			f, err := publishedFile(e.DataFile(), tsField.ID)
			if err != nil {
				return t, fmt.Errorf("the table at %s: %w", pt.Location(), err)
			}
			t.Files = append(t.Files, f)
		}
	}
	slices.SortFunc(t.Files, func(a, b logstore.PublishedFile) int { return cmp.Compare(a.Start, b.Start) })
	for i := 1; i < len(t.Files); i++ {
		if t.Files[i].Start < t.Files[i-1].End {
			return t, fmt.Errorf("the table at %s holds offsets [%d,%d) twice (%s and %s): %w", pt.Location(), t.Files[i].Start, t.Files[i-1].End, t.Files[i-1].Path, t.Files[i].Path, logstore.ErrCorrupt)
		}
	}
	if n := len(t.Files); n > 0 && t.Files[n-1].End-1 != t.Through {
		return t, fmt.Errorf("the table at %s says it holds offsets through %d, but its last file ends at %d: %w", pt.Location(), t.Through, t.Files[n-1].End-1, logstore.ErrCorrupt)
	}
	return t, nil
}

// publishedFile makes the record of one data file.
func publishedFile(df iceberg.DataFile, tsID int) (logstore.PublishedFile, error) {
	p := df.FilePath()
	name := path.Base(p)
	f := logstore.PublishedFile{Name: name, Path: p, Rows: df.Count(), Bytes: df.FileSizeBytes(), Stats: "{}"}
	// Publish names every file <start>-<end>-<token>.parquet.
	parts := strings.SplitN(strings.TrimSuffix(name, ".parquet"), "-", 3)
	var err1, err2 error
	if len(parts) == 3 {
		f.Start, err1 = strconv.ParseInt(parts[0], 10, 64)
		f.End, err2 = strconv.ParseInt(parts[1], 10, 64)
	}
	if len(parts) != 3 || err1 != nil || err2 != nil || f.End-f.Start != f.Rows {
		return f, fmt.Errorf("data file %s (%d rows) is not named <start>-<end>-<token>.parquet for its offsets, as publish names them: %w", p, f.Rows, logstore.ErrCorrupt)
	}
	lo, hi := df.LowerBoundValues()[tsID], df.UpperBoundValues()[tsID]
	if len(lo) != 8 || len(hi) != 8 {
		return f, fmt.Errorf("data file %s has no streamcast_ts bounds in its manifest: %w", p, logstore.ErrCorrupt)
	}
	f.MinTS, f.MaxTS = int64(binary.LittleEndian.Uint64(lo)), int64(binary.LittleEndian.Uint64(hi))
	return f, nil
}

// TakeOver makes the log in l the published table's owner after a
// restore, in one table commit: the owner's log id and the restore's
// token, with every other property kept. A rerun with the same token
// commits nothing. Publishing resumes afterwards exactly where the table
// ends.
func TakeOver(ctx context.Context, l *logstore.Log, token string) error {
	pt, err := l.PublishedTable()
	if err != nil {
		return err
	}
	release, err := l.CommitLock(ctx)
	if err != nil {
		return err
	}
	defer release()
	tbl, err := pt.Load(ctx)
	if errors.Is(err, warehouse.ErrNoTable) {
		return nil // nothing published: the first pass creates it as this log's
	}
	if err != nil {
		return err
	}
	props := tbl.Properties()
	if props[warehouse.PropRestored] == token && props[warehouse.PropLogID] == l.ID() {
		return nil
	}
	if err := pt.ClearClaim(tbl.MetadataLocation()); err != nil {
		return err
	}
	txn := tbl.NewTransaction()
	if err := txn.SetProperties(iceberg.Properties{warehouse.PropLogID: l.ID(), warehouse.PropRestored: token}); err != nil {
		return fmt.Errorf("stage table properties: %w", err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		return fmt.Errorf("take over the table at %s: %w", pt.Location(), err)
	}
	return nil
}

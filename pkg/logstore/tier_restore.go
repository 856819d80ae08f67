package logstore

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/apache/iceberg-go"

	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/schema"
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
	Files []PublishedFile
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
		return t, fmt.Errorf("the table at %s has %s=%q, not an offset: %w", pt.Location(), warehouse.PropPublishedThrough, props[warehouse.PropPublishedThrough], ErrCorrupt)
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
	stats := statFields(tbl.Schema())
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
			f, err := publishedFile(e.DataFile(), tsField.ID, stats)
			if err != nil {
				return t, fmt.Errorf("the table at %s: %w", pt.Location(), err)
			}
			t.Files = append(t.Files, f)
		}
	}
	slices.SortFunc(t.Files, func(a, b PublishedFile) int { return cmp.Compare(a.Start, b.Start) })
	for i := 1; i < len(t.Files); i++ {
		if t.Files[i].Start < t.Files[i-1].End {
			return t, fmt.Errorf("the table at %s holds offsets [%d,%d) twice (%s and %s): %w", pt.Location(), t.Files[i].Start, t.Files[i-1].End, t.Files[i-1].Path, t.Files[i].Path, ErrCorrupt)
		}
	}
	if n := len(t.Files); n > 0 && t.Files[n-1].End-1 != t.Through {
		return t, fmt.Errorf("the table at %s says it holds offsets through %d, but its last file ends at %d: %w", pt.Location(), t.Through, t.Files[n-1].End-1, ErrCorrupt)
	}
	return t, nil
}

// checkWorkers is how many data files CheckFiles looks at at once: on S3
// each look is a round trip, and a table has thousands of files.
const checkWorkers = 16

// CheckFiles verifies that every data file of t is in storage at its
// location with the size the table's manifest records. A restore adopts
// these files as the log's published tier: one that is missing or of
// another size would pass unnoticed until a replay or a read reached it,
// long after the restore reported success. The error, a *FilesMissing,
// names each such file.
func CheckFiles(ctx context.Context, pt *warehouse.Table, files []PublishedFile) error {
	probs := make([]string, len(files))
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(checkWorkers, len(files)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				probs[i], errs[i] = checkFile(pt, files[i])
			}
		}()
	}
feed:
	for i := range files {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	// A file that could not be looked at is no verdict on the table: say
	// so, so the restore is run again rather than the file sought.
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("look at data file %s of the table at %s: %w", files[i].Path, pt.Location(), err)
		}
	}
	var bad []string
	for _, p := range probs {
		if p != "" {
			bad = append(bad, p)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &FilesMissing{Table: pt.Location(), Files: len(files), Problems: bad}
}

// FilesMissing is CheckFiles' error: data files of the table that are
// missing from storage or are not the size the table records.
type FilesMissing struct {
	Table    string   // the table's location
	Files    int      // how many data files the table names
	Problems []string // one sentence per file, naming it
}

// Error names the first ten files and says how many more there are.
func (e *FilesMissing) Error() string {
	probs, more := e.Problems, ""
	if len(probs) > 10 {
		probs, more = probs[:10], fmt.Sprintf("; and %d more", len(probs)-10)
	}
	return fmt.Sprintf("%d of the %d data files of the table at %s are not as its manifests record them: %s%s",
		len(e.Problems), e.Files, e.Table, strings.Join(probs, "; "), more)
}

// checkFile describes what is wrong with one data file, "" when nothing;
// err is a failure to look at it.
func checkFile(pt *warehouse.Table, f PublishedFile) (string, error) {
	size, err := pt.Size(f.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%s (offsets [%d,%d), %d bytes) is missing", f.Path, f.Start, f.End, f.Bytes), nil
	case err != nil:
		return "", err
	case f.Bytes > 0 && size != f.Bytes:
		return fmt.Sprintf("%s (offsets [%d,%d)) holds %d bytes where the table records %d: it was replaced or cut short", f.Path, f.Start, f.End, size, f.Bytes), nil
	}
	return "", nil
}

// publishedFile makes the record of one data file, with the column
// statistics its manifest entry holds exactly (fileStats).
func publishedFile(df iceberg.DataFile, tsID int, stats []iceberg.NestedField) (PublishedFile, error) {
	p := df.FilePath()
	name := path.Base(p)
	f := PublishedFile{Name: name, Path: p, Rows: df.Count(), Bytes: df.FileSizeBytes(), Stats: "{}"}
	// Publish names every file <start>-<end>-<token>.parquet.
	parts := strings.SplitN(strings.TrimSuffix(name, ".parquet"), "-", 3)
	var err1, err2 error
	if len(parts) == 3 {
		f.Start, err1 = strconv.ParseInt(parts[0], 10, 64)
		f.End, err2 = strconv.ParseInt(parts[1], 10, 64)
	}
	if len(parts) != 3 || err1 != nil || err2 != nil || f.End-f.Start != f.Rows {
		return f, fmt.Errorf("data file %s (%d rows) is not named <start>-<end>-<token>.parquet for its offsets, as publish names them: %w", p, f.Rows, ErrCorrupt)
	}
	lo, hi := df.LowerBoundValues()[tsID], df.UpperBoundValues()[tsID]
	if len(lo) != 8 || len(hi) != 8 {
		return f, fmt.Errorf("data file %s has no streamcast_ts bounds in its manifest: %w", p, ErrCorrupt)
	}
	f.MinTS, f.MaxTS = int64(binary.LittleEndian.Uint64(lo)), int64(binary.LittleEndian.Uint64(hi))
	f.Stats = fileStats(df, stats)
	return f, nil
}

// statFields are the table's declared top-level columns whose manifest
// bounds are the exact min and max a sealed file's record keeps: integers,
// booleans and strings. Others (floats, whose canonical form and NaN rule
// differ, temporal and nested columns) get no statistics.
func statFields(sch *iceberg.Schema) []iceberg.NestedField {
	var out []iceberg.NestedField
	for _, f := range sch.Fields() {
		if strings.HasPrefix(f.Name, "streamcast_") {
			continue
		}
		switch f.Type.(type) {
		case iceberg.Int32Type, iceberg.Int64Type, iceberg.BooleanType, iceberg.StringType:
			out = append(out, f)
		}
	}
	return out
}

// fileStats rebuilds a data file's column statistics (Compute's record
// form) from its manifest entry, so that sql prunes a restored file as it
// pruned the file the lost machine sealed. Only exact values are taken:
// the null count, and the bounds of the columns statFields keeps. Iceberg
// truncates string bounds to 16 characters (and rounds the upper one up),
// so a string bound of 16 characters or more may not be the real one: that
// column keeps its null count and no bounds, which prunes nothing.
func fileStats(df iceberg.DataFile, fields []iceberg.NestedField) string {
	rec := map[string]Column{}
	los, his, nulls := df.LowerBoundValues(), df.UpperBoundValues(), df.NullValueCounts()
	for _, f := range fields {
		var c Column
		if n, ok := nulls[f.ID]; ok && n >= 0 {
			c.Nulls = &n
		}
		lo, hi := boundJSON(f.Type, los[f.ID]), boundJSON(f.Type, his[f.ID])
		if lo != nil && hi != nil {
			c.Min, c.Max = lo, hi
		}
		if c.Nulls != nil || c.HasBounds() {
			rec[f.Name] = c
		}
	}
	b, err := json.Marshal(rec)
	if err != nil || len(rec) == 0 {
		return "{}"
	}
	return string(b)
}

// boundJSON decodes an Iceberg single-value bound of type t into the
// canonical JSON scalar a file record keeps; nil when it is absent,
// malformed or possibly truncated.
func boundJSON(t iceberg.Type, b []byte) json.RawMessage {
	switch t.(type) {
	case iceberg.Int32Type:
		if len(b) == 4 {
			return strconv.AppendInt(nil, int64(int32(binary.LittleEndian.Uint32(b))), 10)
		}
	case iceberg.Int64Type:
		if len(b) == 8 {
			return strconv.AppendInt(nil, int64(binary.LittleEndian.Uint64(b)), 10)
		}
	case iceberg.BooleanType:
		if len(b) == 1 {
			return strconv.AppendBool(nil, b[0] != 0)
		}
	case iceberg.StringType:
		if b != nil && utf8.Valid(b) && utf8.RuneCount(b) < 16 {
			return schema.AppendJSONString(nil, b)
		}
	}
	return nil
}

// TakeOver makes the log in l the published table's owner after a
// restore, in one table commit: the owner's log id and the restore's
// token, with every other property kept. A rerun with the same token
// commits nothing. Publishing resumes afterwards exactly where the table
// ends.
func (l *Log) TakeOver(ctx context.Context, token string) error {
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

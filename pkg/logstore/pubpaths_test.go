package logstore

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/hadoop"

	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// pathsLog makes a log publishing under a directory whose name needs
// escaping in a URL (a space), with small files that compaction merges
// and swaps into the table, and no grace or retention anywhere, so a
// clean-published pass deletes whatever it finds unreferenced.
func pathsLog(t *testing.T) *Log {
	cfg := tierConfig()
	cfg.SortBy = []string{"symbol"}
	cfg.TargetFileBytes = 20 << 10
	cfg.Published = filepath.Join(t.TempDir(), "pub lished")
	return createLog(t, mustCompile(t, tradeSchema), cfg)
}

// publishSmall appends n groups and publishes them as their own small
// files, one flush (and table snapshot) each.
func publishSmall(t *testing.T, l *Log, exp expectation, n int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		appendTrades(t, l, exp, 8, 25)
		if _, err := l.Seal(ctx, true); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Publish(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
}

// compactAndClean merges the small files, swaps the merged ones into the
// table, then runs clean and clean-published until what they replaced
// and what only expired snapshots referenced is gone; it checks that
// every row is still read, by the log and by iceberg-go, and that no
// object under the table is unreferenced.
func compactAndClean(t *testing.T, l *Log, exp expectation) {
	t.Helper()
	ctx := context.Background()
	if n, err := l.Compact(ctx, false); err != nil || n == 0 {
		t.Fatalf("Compact = %d, %v", n, err)
	}
	if _, err := l.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := l.Clean(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := l.CleanPublished(ctx); err != nil {
			t.Fatal(err)
		}
	}
	checkTable(t, l, exp)
	checkNoOrphans(t, l)
	_, end, _ := l.Extent(ctx)
	if err := exp.check(scanAll(t, l, 1, end), 1, end); err != nil {
		t.Fatal(err)
	}
}

// tableLocations reads what the table's current metadata names: its
// location (from the metadata JSON itself), its manifest lists, manifests
// and data files (from the Avro files, with iceberg-go) and its marks.
func tableLocations(t *testing.T, l *Log) (loc string, refs []string) {
	t.Helper()
	ctx := context.Background()
	pt, err := l.PublishedTable()
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := pt.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(warehouse.LocalPath(tbl.MetadataLocation()))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Location   string            `json:"location"`
		Properties map[string]string `json:"properties"`
		Snapshots  []struct {
			ManifestList string `json:"manifest-list"`
		} `json:"snapshots"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	refs = append(refs, doc.Properties[warehouse.PropMarks])
	fsys, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range doc.Snapshots {
		refs = append(refs, s.ManifestList)
	}
	mans, err := tbl.CurrentSnapshot().Manifests(fsys)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mans {
		refs = append(refs, m.FilePath())
		entries, err := m.FetchEntries(fsys, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			refs = append(refs, e.DataFile().FilePath())
		}
	}
	return doc.Location, refs
}

func TestALocalTableNamesEveryFileByAFileURL(t *testing.T) {
	l := pathsLog(t)
	exp := expectation{}
	publishSmall(t, l, exp, 3)
	loc, refs := tableLocations(t, l)
	pt, _ := l.PublishedTable()
	if want := warehouse.FileURI(pt.Location()); loc != want || !strings.Contains(loc, "pub%20lished") {
		t.Errorf("the table's location is %q, want the file:// URL %q", loc, want)
	}
	for _, r := range refs {
		if !strings.HasPrefix(r, "file:///") || !strings.Contains(r, "pub%20lished") {
			t.Errorf("the table names %q, not a file:// URL", r)
		}
	}
	// iceberg-go's own catalog opens and scans it; clean-published sees
	// through the spellings, deleting what is garbage and nothing live.
	compactAndClean(t, l, exp)
	_, refs = tableLocations(t, l)
	for _, r := range refs {
		if !strings.HasPrefix(r, "file:///") {
			t.Errorf("after compaction the table names %q, not a file:// URL", r)
		}
	}
}

// rewriteBare makes the log's table what streamcast wrote before local
// tables named their files by file:// URLs: made by the hadoop catalog's
// CreateTable (a bare location, from which iceberg-go derives bare
// manifest lists and manifests), its data files and marks added by their
// bare paths, and buffer.db's records of them spelled so.
func rewriteBare(t *testing.T, l *Log) {
	t.Helper()
	ctx := context.Background()
	pt, err := l.PublishedTable()
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := pt.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	props := tbl.Properties()
	files, err := pt.CurrentFiles(ctx, tbl)
	if err != nil {
		t.Fatal(err)
	}
	marks := warehouse.LocalPath(props[warehouse.PropMarks])
	kept, err := os.ReadFile(marks)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(pt.MetadataDir()); err != nil {
		t.Fatal(err)
	}
	wh, _, ident := publishedAddress(t, l)
	cat, err := hadoop.NewCatalog("old", wh, nil)
	if err != nil {
		t.Fatal(err)
	}
	created := map[string]string{warehouse.PropLogID: l.ID(), warehouse.PropPublishedThrough: "0", "format-version": "2"}
	old, err := cat.CreateTable(ctx, ident, tbl.Schema(), catalog.WithSortOrder(tbl.SortOrder()), catalog.WithProperties(created))
	if err != nil {
		t.Fatal(err)
	}
	var bare []string
	for _, p := range files {
		bare = append(bare, warehouse.LocalPath(p))
	}
	if err := os.WriteFile(marks, kept, 0o644); err != nil {
		t.Fatal(err)
	}
	txn := old.NewTransaction()
	if err := txn.SetProperties(map[string]string{warehouse.PropPublishedThrough: props[warehouse.PropPublishedThrough], warehouse.PropPass: props[warehouse.PropPass], warehouse.PropMarks: marks}); err != nil {
		t.Fatal(err)
	}
	if err := txn.AddFiles(ctx, bare, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err = l.update(ctx, func(c *recordTx) error {
		for _, p := range files {
			if _, err := c.ExecContext(ctx, `UPDATE published SET path = ? WHERE path = ?`, warehouse.LocalPath(p), p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestATableWrittenWithBarePathsIsStillReadPublishedToCleanedAndRestored(t *testing.T) {
	ctx := context.Background()
	l := pathsLog(t)
	exp := expectation{}
	publishSmall(t, l, exp, 3)
	rewriteBare(t, l)
	loc, refs := tableLocations(t, l)
	if !strings.HasPrefix(loc, "/") {
		t.Fatalf("the fixture's location is %q, not a bare path", loc)
	}
	for _, r := range refs {
		if !strings.HasPrefix(r, "/") {
			t.Fatalf("the fixture names %q, not a bare path", r)
		}
	}
	checkTable(t, l, exp)

	// Restored and read: a fresh log reads the table's files back, checks
	// each one, adopts them as its published tier and reads every row
	// from them, by their bare paths.
	pt, _ := l.PublishedTable()
	tab, err := ReadTable(ctx, pt)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckFiles(ctx, pt, tab.Files); err != nil {
		t.Fatal(err)
	}
	_, end, _ := l.Extent(ctx)
	cfg := l.Config()
	cfg.Published = pt.Location()
	l2, err := Create(filepath.Join(t.TempDir(), "s", "log"), l.Schema(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if err := l2.ApplyRebase(ctx, Rebase{LogID: l.ID(), Published: tab.Files, Through: tab.Through, Resume: end}); err != nil {
		t.Fatal(err)
	}
	if err := l2.TakeOver(ctx, "restored"); err != nil {
		t.Fatal(err)
	}
	if err := exp.check(scanAll(t, l2, 1, end), 1, end); err != nil {
		t.Fatal(err)
	}
	l2.Close()

	// Published to: new files by URL beside the old ones by path; the
	// compaction swaps files of both spellings out, and clean-published
	// deletes them, and what expired snapshots held, and nothing live.
	publishSmall(t, l, exp, 1)
	_, refs = tableLocations(t, l)
	var urls, paths int
	for _, r := range refs {
		if strings.HasPrefix(r, "file:///") {
			urls++
		} else {
			paths++
		}
	}
	if urls == 0 || paths == 0 {
		t.Fatalf("after publishing into the old table it names %d URLs and %d bare paths, want both: %v", urls, paths, refs)
	}
	compactAndClean(t, l, exp)
}

package history_test

import (
	"context"
	"io"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta/history"
)

// TestAPublishedFileReplacedByAnotherIsRefusedNamingIt copies the table's
// second file over its first: both are valid files of the table, so only
// their offsets tell them apart. Every read that reaches the first file's
// range (Scan for sql, Rows for catch-up, Export for snapshot) is refused
// naming it, as serve's replay refuses it; a read of the second file's
// range alone is still answered, exactly.
func TestAPublishedFileReplacedByAnotherIsRefusedNamingIt(t *testing.T) {
	for _, where := range []string{"local", "s3"} {
		t.Run(where, func(t *testing.T) {
			f, pt, tab := twoFiles(t, where == "s3")
			a, b := tab.Files[0], tab.Files[1]
			overwrite(t, pt, a.Path, readObject(t, pt, b.Path))
			reads(t, f, path.Base(a.Path), "row group 0 holds offsets [51,80] in 30 rows where [1,…) was expected")
			r := f.open(t, history.Options{})
			got := 0
			if err := r.Rows(context.Background(), 51, 81, nil, func(int64, int64, []byte) error { got++; return nil }); err != nil || got != 30 {
				t.Fatalf("rows [51,81), which the replaced file does not hold: %d, %v", got, err)
			}
		})
	}
}

// TestAMissingFileTheTableStillListsIsCalledMissing removes a data file
// the table's current snapshot lists: reading again cannot help, so the
// refusal says the file is missing and to put it back, not that it was
// deleted under the read.
func TestAMissingFileTheTableStillListsIsCalledMissing(t *testing.T) {
	f, pt, tab := twoFiles(t, false)
	if err := pt.Remove(tab.Files[0].Path); err != nil {
		t.Fatal(err)
	}
	reads(t, f, path.Base(tab.Files[0].Path), "is missing: the table's current snapshot lists it")
}

// twoFiles makes a stream whose table holds [1,51) and [51,81) in two
// files.
func twoFiles(t *testing.T, onS3 bool) (*fixture, *warehouse.Table, logstore.Table) {
	t.Helper()
	f := newFixture(t, onS3)
	f.create(t, schemaV1)
	f.append(t, 50, true)
	f.append(t, 30, true)
	pt, err := warehouse.NewTable(f.lay.Published(), stream, stream, f.s3cfg)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := logstore.ReadTable(context.Background(), pt)
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Files) != 2 || tab.Files[0].End != 51 {
		t.Fatalf("the table holds %+v; want [1,51) and [51,81)", tab.Files)
	}
	return f, pt, tab
}

// reads checks that each way of reading the whole history is refused as
// a damaged file, naming file and saying want.
func reads(t *testing.T, f *fixture, file, want string) {
	t.Helper()
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		if !history.IsRefusal(err, history.WhyDamaged) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want a refusal naming %s and saying %q", what, err, file, want)
		}
	}
	r := f.open(t, history.Options{})
	rr, err := r.Scan(ctx, history.ScanRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for rr.Next() {
	}
	check("scan", rr.Err())
	rr.Release()
	check("rows", r.Rows(ctx, 0, 0, nil, func(int64, int64, []byte) error { return nil }))
	_, err = r.Export(ctx, history.ExportOptions{Format: history.FormatFrames, Out: io.Discard})
	check("export", err)
}

// readObject returns the bytes of a published object.
func readObject(t *testing.T, pt *warehouse.Table, p string) []byte {
	t.Helper()
	size, err := pt.Size(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := pt.OpenFile(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := make([]byte, size)
	if _, err := r.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return b
}

// overwrite replaces a published object's bytes, as a careless copy or an
// attacker with write access to the prefix would.
func overwrite(t *testing.T, pt *warehouse.Table, p string, body []byte) {
	t.Helper()
	if pt.Local() {
		if err := os.WriteFile(strings.TrimPrefix(p, "file://"), body, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	tmp := t.TempDir() + "/" + path.Base(p)
	if err := os.WriteFile(tmp, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pt.Upload(context.Background(), tmp, p); err != nil {
		t.Fatal(err)
	}
}

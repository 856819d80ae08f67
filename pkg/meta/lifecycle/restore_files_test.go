//go:build linux

package lifecycle_test

import (
	"context"
	"errors"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
)

// TestRestoreRefusesATableWhoseDataFileIsGone loses the machine, then one
// data file of the published table (on a file:// prefix and on S3): the
// restore refuses, naming the file and the way out, and a rerun once the
// file is back finishes it. A restore that adopted the table as it was
// would report success and leave serve to fail its first replay.
func TestRestoreRefusesATableWhoseDataFileIsGone(t *testing.T) {
	for _, kind := range []string{"file", "s3"} {
		t.Run(kind, func(t *testing.T) {
			f := lostMachineAt(t, kind, false)
			ctx := context.Background()
			pt, err := warehouse.NewTable(f.lay.Published(), stream, stream, f.s3cfg)
			if err != nil {
				t.Fatal(err)
			}
			tab, err := logstore.ReadTable(ctx, pt)
			if err != nil || len(tab.Files) == 0 {
				t.Fatalf("the table lists %d files (%v); want at least one", len(tab.Files), err)
			}
			gone := tab.Files[0]
			body := readPublished(t, pt, gone.Path)
			if err := pt.Remove(gone.Path); err != nil {
				t.Fatal(err)
			}

			_, err = f.restore(t)
			var fm *logstore.FilesMissing
			if !errors.Is(err, lifecycle.ErrRestoreRefused) || !errors.As(err, &fm) {
				t.Fatalf("restore with %s gone: %v; want a refusal naming the missing file", path.Base(gone.Path), err)
			}
			for _, want := range []string{path.Base(gone.Path), "is missing", "put each file back"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal does not say %q: %v", want, err)
				}
			}
			t.Logf("refused: %v", err)

			// The file comes back (from a backup): the rerun finishes.
			writePublished(t, pt, gone.Path, body)
			if _, err := f.restore(t); err != nil {
				t.Fatalf("restore with the file back: %v", err)
			}
		})
	}
}

// readPublished returns the bytes of a published object.
func readPublished(t *testing.T, pt *warehouse.Table, p string) []byte {
	t.Helper()
	r, err := pt.OpenFile(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	size, err := pt.Size(p)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if _, err := r.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

// writePublished puts an object back at its location.
func writePublished(t *testing.T, pt *warehouse.Table, p string, body []byte) {
	t.Helper()
	tmp := t.TempDir() + "/" + path.Base(p)
	if err := os.WriteFile(tmp, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pt.Upload(context.Background(), tmp, strings.TrimPrefix(p, "file://")); err != nil {
		t.Fatal(err)
	}
}

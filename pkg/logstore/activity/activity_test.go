package activity

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestReadSeesAWriteAndNothingElse: two reads with nothing written between
// them are equal, a write to the database or its WAL changes the
// fingerprint, and a directory without the database is fs.ErrNotExist.
func TestReadSeesAWriteAndNothingElse(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(dir, "buffer.db"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no database: %v, want fs.ErrNotExist", err)
	}
	db := filepath.Join(dir, "buffer.db")
	if err := os.WriteFile(db, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Read(dir, "buffer.db")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := Read(dir, "buffer.db"); err != nil || b != a {
		t.Fatalf("nothing written: %+v then %+v (%v)", a, b, err)
	}
	if err := os.WriteFile(db+"-wal", []byte("a commit"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Read(dir, "buffer.db")
	if err != nil || b == a {
		t.Fatalf("a WAL appeared and the fingerprint stayed %+v (%v)", b, err)
	}
	if err := os.WriteFile(db, []byte("one, then two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := Read(dir, "buffer.db"); err != nil || c == b {
		t.Fatalf("the database grew and the fingerprint stayed %+v (%v)", c, err)
	}
}

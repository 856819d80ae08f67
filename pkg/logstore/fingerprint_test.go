package logstore

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
	if _, err := Read(dir, BufferFile); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no database: %v, want fs.ErrNotExist", err)
	}
	db := filepath.Join(dir, BufferFile)
	if err := os.WriteFile(db, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Read(dir, BufferFile)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := Read(dir, BufferFile); err != nil || b != a {
		t.Fatalf("nothing written: %+v then %+v (%v)", a, b, err)
	}
	if err := os.WriteFile(db+"-wal", []byte("a commit"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Read(dir, BufferFile)
	if err != nil || b == a {
		t.Fatalf("a WAL appeared and the fingerprint stayed %+v (%v)", b, err)
	}
	if err := os.WriteFile(db, []byte("one, then two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := Read(dir, BufferFile); err != nil || c == b {
		t.Fatalf("the database grew and the fingerprint stayed %+v (%v)", c, err)
	}
}

// TestReadTellsARebuiltIndexFromACommit: with a WAL index, only the part
// of its header that says what the WAL holds counts: the change counter
// moving (as when the first opener rebuilds the index) leaves the
// fingerprint alone, the last frame moving changes it; and an index that
// is being rebuilt (cut to a few bytes, or not yet initialised) is
// ErrInFlux, not a change.
func TestReadTellsARebuiltIndexFromACommit(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, BufferFile)
	if err := os.WriteFile(db, []byte("db"), 0o644); err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 48)
	hdr[walIndexInit] = 1
	hdr[16] = 7 // mxFrame
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(db+"-shm", b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(hdr)
	a, err := Read(dir, BufferFile)
	if err != nil {
		t.Fatal(err)
	}
	hdr[8]++ // iChange: the rebuild's
	write(hdr)
	if b, err := Read(dir, BufferFile); err != nil || b != a {
		t.Fatalf("the change counter moved and the fingerprint with it (%v)", err)
	}
	for name, b := range map[string][]byte{"cut short": {0, 0, 0}, "not initialised": make([]byte, 48)} {
		write(b)
		if _, err := Read(dir, BufferFile); !errors.Is(err, ErrInFlux) {
			t.Fatalf("an index %s: %v, want ErrInFlux", name, err)
		}
	}
	hdr[16]++ // a commit: one more frame
	write(hdr)
	if c, err := Read(dir, BufferFile); err != nil || c == a {
		t.Fatalf("a commit left the fingerprint as it was (%v)", err)
	}
}

package logstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/streamcast/streamcast/pkg/schema"
)

// TestCreateLeavesAWholeWALDatabaseAndNothingToCheckpoint: Create renames
// a finished buffer.db into place, already in WAL mode (its header says
// so), and leaves its WAL empty: the log's first close has nothing to
// checkpoint, so it syncs nothing (a migration closes and reopens the log
// it made while other streams commit). Nothing of the build is left.
func TestCreateLeavesAWholeWALDatabaseAndNothingToCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s", "log")
	l, err := Create(dir, schema.Any(), named(Config{Start: 7}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, newBufferFile)); !os.IsNotExist(err) {
		t.Errorf("Create left %s behind (%v)", newBufferFile, err)
	}
	head := make([]byte, 20)
	f, err := os.Open(filepath.Join(dir, BufferFile))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(head, 0)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Bytes 18 and 19 of a SQLite header are the write and read versions:
	// 2 is WAL.
	if head[18] != 2 || head[19] != 2 {
		t.Errorf("buffer.db's header says file format %d/%d; want 2/2, a WAL database", head[18], head[19])
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, BufferFile+"-wal")); err == nil && fi.Size() != 0 {
		t.Errorf("after Create and Close the WAL holds %d bytes; want none, nothing for a close to checkpoint", fi.Size())
	}
	l = openLog(t, dir, Writer)
	if start, end, err := l.Extent(context.Background()); err != nil || start != 7 || end != 7 {
		t.Errorf("the reopened log: extent [%d,%d) (%v); want empty from 7", start, end, err)
	}
}

package activity

import (
	"fmt"
	"io/fs"
	"path/filepath"
)

// Activity is a cheap fingerprint of a log's stored state, read without
// opening the log: two equal Activities mean no transaction committed to
// buffer.db in between, so a maintenance step that found nothing to do
// would find nothing again (until a clock deadline comes due; see
// logstore's Log.NextDue). Every change a step acts on (appended rows, a
// file sealed, merged, published or queued for deletion) commits to
// buffer.db.
type Activity struct {
	db, wal stamp
	// walIndex is the header of buffer.db-shm, SQLite's WAL index: its
	// change counter moves with every commit, even one that rewrites a
	// WAL of unchanged size within one tick of the file system's clock.
	walIndex [48]byte
}

// stamp is what stat says of one file.
type stamp struct {
	size  int64
	mtime int64
}

// Read reads the Activity of the log in dir, whose buffer database is
// dir/file: while some process has the log open, one 48-byte read of the
// WAL index; otherwise a stat of the database and its WAL. A directory with neither buffer.db nor its WAL
// index is an error wrapping fs.ErrNotExist.
func Read(dir, file string) (Activity, error) {
	var a Activity
	path := dir + string(filepath.Separator) + file
	// The header moves with every commit and checkpoint: while it is
	// there, the files' stamps add nothing.
	if readHeader(path+"-shm", a.walIndex[:]) {
		return a, nil
	}
	a.walIndex = [48]byte{}
	db, ok, err := statStamp(path)
	switch {
	case err != nil:
		return a, fmt.Errorf("read the state of log %s: %w", dir, err)
	case !ok:
		return a, fmt.Errorf("no log at %s (%s is missing): %w", dir, path, fs.ErrNotExist)
	}
	a.db = db
	if a.wal, _, err = statStamp(path + "-wal"); err != nil {
		return a, fmt.Errorf("read the state of log %s: %w", dir, err)
	}
	return a, nil
}

package logstore

import (
	"errors"
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
	// walIndex is the part of buffer.db-shm's header (SQLite's WAL
	// index) that says what the WAL holds: page size, the last valid
	// frame, the database's size in pages, the running frame checksum
	// and the WAL's salts. Every commit moves the last frame or, when it
	// restarts the WAL, the salts, even one that rewrites a WAL of
	// unchanged size within one tick of the file system's clock. The
	// rest of the header (a version, a change counter, its own checksum)
	// is rewritten when the first process to open the log rebuilds the
	// index, which is not a commit: a log that processes open and close
	// in turn, as idle logs are, must not look changed.
	walIndex [walIndexTo - walIndexFrom]byte
}

// The span of the WAL index header (SQLite's WalIndexHdr) kept in an
// Activity: szPage at 14 through aSalt, which ends at 40.
const (
	walIndexFrom = 14
	walIndexTo   = 40
	walIndexInit = 12 // isInit: 0 while the index is being rebuilt
)

// stamp is what stat says of one file.
type stamp struct {
	size  int64
	mtime int64
}

// Read reads the Activity of the log in dir, whose buffer database is
// dir/file: while its WAL index is there (logstore keeps it across
// closes), one 40-byte read of the index's header; otherwise a stat of
// the database and its WAL. A directory with neither buffer.db nor its
// WAL index is an error wrapping fs.ErrNotExist.
func Read(dir, file string) (Activity, error) {
	var a Activity
	path := dir + string(filepath.Separator) + file
	// The header moves with every commit and checkpoint: while it is
	// there, the files' stamps add nothing.
	var hdr [walIndexTo]byte
	inFlux := false
	switch n := readHeader(path+"-shm", hdr[:]); {
	case n == len(hdr) && hdr[walIndexInit] != 0:
		copy(a.walIndex[:], hdr[walIndexFrom:])
		return a, nil
	case n >= 0:
		// The index is there but not whole: the first process to open
		// the log truncates it and rebuilds it from the WAL, the same
		// header as before the rebuild unless something commits. Say so rather
		// than hand back a fingerprint that differs only for that.
		inFlux = true
	}
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
	if inFlux {
		return a, fmt.Errorf("read the state of log %s: %w", dir, ErrInFlux)
	}
	return a, nil
}

// ErrInFlux is wrapped by Read when another process is rebuilding the
// log's WAL index just now (its first open of the log): the Activity
// returned beside it is the files' stamps, which says nothing of whether
// anything committed. Look again a moment later.
var ErrInFlux = errors.New("the WAL index is being rebuilt by a process opening the log")

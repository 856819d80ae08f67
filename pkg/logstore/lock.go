package logstore

import (
	"errors"

	"github.com/streamcast/streamcast/pkg/logstore/filelock"
)

// fileLock is an exclusive lock held on one file (package filelock).
type fileLock = filelock.Lock

// tryLock takes an exclusive lock on path without waiting. When another
// process holds it, tryLock returns a *LockedError carrying the pid found
// in the file.
func tryLock(path string) (*fileLock, error) {
	lk, err := filelock.Try(path)
	if errors.Is(err, filelock.ErrHeld) {
		return nil, &LockedError{Path: path, PID: filelock.Holder(path)}
	}
	return lk, err
}

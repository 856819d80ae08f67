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
	if held := (*filelock.HeldError)(nil); errors.As(err, &held) {
		return nil, &LockedError{Path: held.Path, PID: held.PID}
	}
	return lk, err
}

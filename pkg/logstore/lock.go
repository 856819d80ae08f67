package logstore

import (
	"errors"
)

// fileLock is an exclusive lock held on one file (Lock, filelock.go).
type fileLock = Lock

// tryLock takes an exclusive lock on path without waiting. When another
// process holds it, tryLock returns a *LockedError carrying the pid found
// in the file.
func tryLock(path string) (*fileLock, error) {
	lk, err := Try(path)
	if errors.Is(err, ErrHeld) {
		return nil, &LockedError{Path: path, PID: Holder(path)}
	}
	return lk, err
}

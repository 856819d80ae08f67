package logstore

import (
	"errors"
	"fmt"
	"path/filepath"
)

// LockRole takes <dir>/<role>.lock for a process that works beside a log
// without opening it as a maintainer, such as the replicator of its
// buffer.db. It fails at once with ErrBusy, naming the holder's pid, when
// another process holds the lock; the kernel drops it if the holder dies.
func LockRole(dir, role string) (release func(), err error) {
	path := filepath.Join(dir, role+".lock")
	lk, err := tryLock(path)
	if err != nil {
		var le *LockedError
		if errors.As(err, &le) && le.PID > 0 {
			return nil, fmt.Errorf("%w: pid %d holds %s", ErrBusy, le.PID, path)
		}
		if errors.As(err, &le) {
			return nil, fmt.Errorf("%w: %s is held", ErrBusy, path)
		}
		return nil, err
	}
	return lk.Release, nil
}

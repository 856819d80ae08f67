//go:build windows

package logstore

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockOffset is where the locked byte sits: far past the pid written at the
// start of the file, because Windows byte-range locks are mandatory and a
// locked first byte would stop another process from reading the holder's pid.
const lockOffset = 1 << 30

// flockExclusive takes an exclusive lock on one byte of f without waiting. Like
// flock, the lock dies with the process that holds it.
func flockExclusive(f *os.File) error {
	ol := windows.Overlapped{Offset: lockOffset}
	err := windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return ErrHeld
	}
	return err
}

func unlockFile(f *os.File) error {
	ol := windows.Overlapped{Offset: lockOffset}
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &ol)
}

package logstore

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrHeld is what Try returns when another open file description holds
// the lock; Holder names the holder.
var ErrHeld = errors.New("lock held by another process")

// Lock is an exclusive flock held on one file. The kernel drops it when
// the process dies, so a crashed holder never leaves a stale lock behind;
// the pid written into the file only serves error messages.
type Lock struct {
	f *os.File
}

// Try takes an exclusive flock on path without waiting. When another open
// file description holds it, Try returns ErrHeld.
func Try(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err = flockExclusive(f); err != nil {
		f.Close()
		if errors.Is(err, ErrHeld) {
			return nil, ErrHeld
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// The pid is advisory: written after the lock is held so a reader that
	// fails to take the lock finds the holder's pid (or, briefly, nothing).
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Holder returns the pid the holder of a lock wrote in its file, or 0 when
// there is none to read.
func Holder(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// Release drops the lock; it does nothing on a nil or released Lock. The
// file stays: removing it would let a process that opened the old inode and
// one that creates a new one both "hold" it.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	_ = unlockFile(l.f)
	_ = l.f.Close()
	l.f = nil
}

package logstore

import (
	"errors"
	"fmt"
)

// ErrBusy reports that another process (or goroutine) holds the lock of a
// maintenance role (seal.lock, clean.lock); the step should simply be tried
// again on the next pass.
var ErrBusy = errors.New("another process is running this maintenance step")

// ErrReadOnly reports a write attempted through a handle opened ReadOnly.
var ErrReadOnly = errors.New("log is open read-only")

// ErrNotWriter reports an Append through a handle that is not the log's
// Writer: only the process holding the lock file appends (I7).
var ErrNotWriter = errors.New("only the writer holding the log's lock file may append")

// ErrCorrupt marks a log whose stored data cannot be trusted: a sealed file
// that cannot be read or disagrees with its record, or a buffer with a gap.
// Bytes from such a source are never served.
var ErrCorrupt = errors.New("log data is corrupt")

// ErrClosed reports a call on a closed Log.
var ErrClosed = errors.New("log is closed")

// LockedError reports that another process holds the log's writer lock.
type LockedError struct {
	Path string // the lock file
	PID  int    // the holder's pid as written in the lock file; 0 when unreadable
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("log is locked for writing by pid %d (lock file %s); only one process may append to a log: stop that process first", e.PID, e.Path)
	}
	return fmt.Sprintf("log is locked for writing by another process (lock file %s); only one process may append to a log: stop that process first", e.Path)
}

// RangeError reports a scan of offsets the log does not hold: below
// Earliest (evicted or never written) or past End (not yet written).
type RangeError struct {
	From, To      int64 // the range asked for, [From, To)
	Earliest, End int64 // the range the log serves, [Earliest, End)
}

func (e *RangeError) Error() string {
	switch {
	case e.From > e.To:
		return fmt.Sprintf("offset range [%d,%d) is empty and reversed: from must not exceed to", e.From, e.To)
	case e.From < e.Earliest:
		return fmt.Sprintf("offset %d is below %d, the earliest this log still holds (it serves [%d,%d))", e.From, e.Earliest, e.Earliest, e.End)
	default:
		return fmt.Sprintf("offset range [%d,%d) reaches past %d, the end of this log (it serves [%d,%d))", e.From, e.To, e.End, e.Earliest, e.End)
	}
}

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
// earliest (evicted or never written) or past End (not yet written).
type RangeError struct {
	From, To      int64 // the range asked for, [From, To)
	Earliest, End int64 // the range the log serves, [earliest, End)
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

// ErrFenced reports an Append to a log fenced against writes for good
// (Fence): a migrated or retired log, whose successor, if any, takes the
// writes. Use errors.As with *FencedError for the end offset.
var ErrFenced = errors.New("log is fenced against writes")

// FencedError is the error Append returns on a fenced log; it matches
// ErrFenced.
type FencedError struct {
	Dir string // the log's directory
	End int64  // the log's end: the offset its successor starts at
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("log %s is fenced against writes at offset %d: no row is appended to it again; its rows stay readable", e.Dir, e.End)
}

// Is makes errors.Is(err, ErrFenced) hold.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

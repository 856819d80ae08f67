//go:build unix

package ndjson

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Interruptible returns a reader of f that Load can stop while it waits
// for input, and release, which undoes what it did and must be called
// once the reader is no longer used. f itself stays open and untouched.
//
// A read of a quiet pipe or terminal blocks in the kernel, and Load returns
// only once its reader has stopped, so stdin must be stoppable for a load
// to end at SIGINT while no line arrives. The reader reads a duplicate of
// f's descriptor in non-blocking mode, through the runtime's poller, where
// a read deadline ends a waiting Read. A regular file never blocks and is
// returned as it is, as is f when the duplicate cannot be made.
func Interruptible(f *os.File) (r io.Reader, release func()) {
	nothing := func() {}
	if st, err := f.Stat(); err != nil || st.Mode().IsRegular() {
		return f, nothing
	}
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return f, nothing
	}
	// O_NONBLOCK belongs to the open file, which f and the duplicate
	// share (and, for a terminal, the shell): release puts it back as it
	// was.
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		unix.Close(fd)
		return f, nothing
	}
	wasNonblocking := flags&unix.O_NONBLOCK != 0
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return f, nothing
	}
	dup := os.NewFile(uintptr(fd), f.Name())
	return dup, func() {
		if !wasNonblocking {
			_ = unix.SetNonblock(fd, false)
		}
		dup.Close()
	}
}

//go:build darwin || linux || openbsd

package broker

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// directWrites reports whether this platform has writeNow.
const directWrites = true

// writeNow writes frames with one writev that never waits: the socket is in
// non-blocking mode under Go's poller, so a full socket buffer makes the
// kernel take part of the frames or none (EAGAIN), and the caller queues
// the rest for the connection's writer. It returns the bytes the kernel
// took; the error is nil for a write that would have blocked.
func writeNow(rc syscall.RawConn, frames [][]byte) (int64, error) {
	var n int
	var werr error
	err := rc.Write(func(fd uintptr) bool {
		for {
			n, werr = unix.Writev(int(fd), frames)
			if werr != unix.EINTR {
				break
			}
		}
		return true // never wait for the socket: that is the writer's job
	})
	if err != nil {
		return 0, err
	}
	if werr != nil {
		if errors.Is(werr, unix.EAGAIN) {
			return 0, nil
		}
		return 0, werr
	}
	return int64(n), nil
}

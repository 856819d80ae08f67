//go:build darwin || linux || openbsd

package broker

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directWrites reports whether this platform has writeNow.
const directWrites = true

// iovecs is writeNow's scratch space, reused by its caller so a write
// allocates no iovec array (unix.Writev makes one per call past 8 frames).
type iovecs []unix.Iovec

// writeNow writes frames with one writev that never waits: the socket is in
// non-blocking mode under Go's poller, so a full socket buffer makes the
// kernel take part of the frames or none (EAGAIN), and the caller queues
// the rest for the connection's writer. It returns the bytes the kernel
// took; the error is nil for a write that would have blocked.
func writeNow(rc syscall.RawConn, frames [][]byte, iov *iovecs) (int64, error) {
	v := (*iov)[:0]
	for _, f := range frames {
		if len(f) > 0 {
			e := unix.Iovec{Base: &f[0]}
			e.SetLen(len(f))
			v = append(v, e)
		}
	}
	*iov = v
	if len(v) == 0 {
		return 0, nil
	}
	var n uintptr
	var errno syscall.Errno
	err := rc.Write(func(fd uintptr) bool {
		for {
			n, _, errno = unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&v[0])), uintptr(len(v)))
			if errno != unix.EINTR {
				break
			}
		}
		return true // never wait for the socket: that is the writer's job
	})
	clear(v) // the frames' memory is not pinned by the scratch
	switch {
	case err != nil:
		return 0, err
	case errno == unix.EAGAIN:
		return 0, nil
	case errno != 0:
		return 0, errno
	}
	return int64(n), nil
}

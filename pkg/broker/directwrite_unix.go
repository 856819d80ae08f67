//go:build darwin || linux

package broker

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// rawConnOf returns the socket under nc for writes that must not wait
// (wsConn.writeClaimed), or nil when nc has none.
func rawConnOf(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// writevNow makes one writev of bufs on rc without waiting for the socket
// to be writable, and returns the bytes the kernel took: 0 when it took
// none (a full socket buffer) or the write failed. A failure is left for
// the writer goroutine, whose write meets it again and ends the
// connection the usual way.
func writevNow(rc syscall.RawConn, bufs [][]byte) int {
	var n int
	err := rc.Write(func(fd uintptr) bool {
		var werr error
		n, werr = unix.Writev(int(fd), bufs)
		if werr != nil || n < 0 {
			n = 0
		}
		return true // never wait: what is left goes to the writer
	})
	if err != nil {
		return 0
	}
	return n
}

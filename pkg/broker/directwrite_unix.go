//go:build darwin || linux

package broker

import (
	"net"
	"sync"
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

// maxCoalesced is the most bytes writevNow copies into one buffer rather
// than hand the kernel an iovec per frame: a commit group's replies are a
// few hundred bytes, and unix.Writev allocates its iovecs once there are
// more than 8 of them.
const maxCoalesced = 16 << 10

var coalescePool = sync.Pool{New: func() any { b := make([]byte, 0, maxCoalesced); return &b }}

// writevNow writes bufs on rc with one syscall, without waiting for the
// socket to be writable, and returns the bytes the kernel took: 0 when it
// took none (a full socket buffer) or the write failed. A failure is left
// for the writer goroutine, whose write meets it again and ends the
// connection the usual way.
func writevNow(rc syscall.RawConn, bufs [][]byte) int {
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	var one *[]byte
	if total <= maxCoalesced && len(bufs) > 1 {
		one = coalescePool.Get().(*[]byte)
		b := (*one)[:0]
		for _, f := range bufs {
			b = append(b, f...)
		}
		*one = b
		defer coalescePool.Put(one)
	}
	var n int
	err := rc.Write(func(fd uintptr) bool {
		var werr error
		if one != nil {
			n, werr = unix.Write(int(fd), *one)
		} else {
			n, werr = unix.Writev(int(fd), bufs)
		}
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

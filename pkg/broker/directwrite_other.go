//go:build !darwin && !linux

package broker

import (
	"net"
	"syscall"
)

// rawConnOf returns nil: this platform has no writev in x/sys/unix, so
// every write goes through the writer goroutine.
func rawConnOf(net.Conn) syscall.RawConn { return nil }

// writevNow is never called where rawConnOf returns nil.
func writevNow(syscall.RawConn, [][]byte) int { return 0 }

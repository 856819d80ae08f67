//go:build !(darwin || linux || openbsd)

package broker

import (
	"errors"
	"syscall"
)

// directWrites reports whether this platform has writeNow: without a
// writev of its own, every reply goes through the connection's writer.
const directWrites = false

// iovecs is writeNow's scratch space (none here).
type iovecs struct{}

func writeNow(syscall.RawConn, [][]byte, *iovecs) (int64, error) {
	return 0, errors.New("direct writes are not supported on this platform")
}

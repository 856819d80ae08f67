//go:build !(darwin || linux || openbsd)

package broker

import (
	"errors"
	"syscall"
)

// directWrites reports whether this platform has writeNow: without a
// writev of its own, every reply goes through the connection's writer.
const directWrites = false

func writeNow(syscall.RawConn, [][]byte) (int64, error) {
	return 0, errors.New("direct writes are not supported on this platform")
}

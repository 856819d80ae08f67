//go:build unix

package cmd

import (
	"fmt"
	"os"
	"syscall"
)

// openAddFD opens the descriptor serve hands a maintain child more logs on
// (--add-fd). It is made non-blocking first, so that the runtime's poller
// reads it and closing it ends a read in progress: the reader is waited
// for when maintain exits, and serve keeps its end open until then.
func openAddFD(fd int) (*os.File, error) {
	if err := syscall.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("not an open file descriptor: %w", err)
	}
	f := os.NewFile(uintptr(fd), "add")
	if _, err := f.Stat(); err != nil {
		_ = f.Close() // now, while the number is free, not from a finalizer later
		return nil, fmt.Errorf("not an open file descriptor: %w", err)
	}
	return f, nil
}

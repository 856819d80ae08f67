//go:build unix

package broker

import "syscall"

// descriptorLimit is the process's soft limit on open descriptors (Go
// raises it to the hard limit at start on Linux and macOS), or 0 when it
// cannot be read.
func descriptorLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return uint64(lim.Cur)
}

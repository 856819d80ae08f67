//go:build unix

package cmd

import (
	"os"
	"syscall"
)

// flushSignal asks a maintain process for a flushing pass (serve sends it at
// a graceful stop).
var flushSignal = []os.Signal{syscall.SIGUSR1}

// heapSignal asks a maintain process for a heap profile, when
// STREAMCAST_HEAP_PROFILE_DIR is set.
var heapSignal = []os.Signal{syscall.SIGUSR2}

// reloadSignal asks serve to read its config again (SIGHUP).
var reloadSignal = []os.Signal{syscall.SIGHUP}

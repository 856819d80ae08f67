//go:build unix

package history_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process has used, user and system: on a
// shared box a benchmark's rows per CPU-second says what the code costs
// when its wall time says mostly how loaded the box was.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

//go:build unix

package schema

import "syscall"

// cpuNanos is the CPU time this process has used (user + system). The
// benchmarks report it per row beside wall time, because on a shared
// machine wall time also counts the time other processes held the CPU.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

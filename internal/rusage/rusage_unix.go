//go:build unix

package rusage

import "syscall"

// Self returns this process's user + system CPU seconds and its peak
// resident set size in bytes, from getrusage(2). It is the one reading of
// getrusage in the module: /stats reports it for the server, and the load
// generator (internal/loadgen) reports it for itself. Both are zero when the
// call fails.
func Self() (cpuSeconds float64, peakRSSBytes int64) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime), int64(ru.Maxrss) * maxRSSUnit
}

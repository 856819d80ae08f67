//go:build unix

package broker

import "syscall"

// rusage returns this process's user + system CPU seconds and its peak RSS.
func rusage() (cpuSeconds float64, maxRSSBytes int64) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	maxRSS := int64(ru.Maxrss) * 1024 // KiB on Linux
	return tv(ru.Utime) + tv(ru.Stime), maxRSS
}

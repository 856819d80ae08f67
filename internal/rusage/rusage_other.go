//go:build !unix

package rusage

// Self reports zeros where getrusage(2) does not exist; callers show the
// CPU time and peak RSS as unknown rather than guess.
func Self() (cpuSeconds float64, peakRSSBytes int64) { return 0, 0 }

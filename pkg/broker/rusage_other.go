//go:build !unix

package broker

// rusage reports zeros where getrusage does not exist.
func rusage() (cpuSeconds float64, maxRSSBytes int64) { return 0, 0 }

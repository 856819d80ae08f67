//go:build !unix

package schema

// cpuNanos is unavailable here; the cpu-ns/row metric then reads 0.
func cpuNanos() int64 { return 0 }

//go:build darwin || ios

package rusage

// maxRSSUnit is the unit of ru_maxrss in bytes: Darwin reports bytes
// already, so scaling it as KiB would overstate memory 1024 times.
const maxRSSUnit = 1

//go:build unix && !darwin && !ios

package rusage

// maxRSSUnit is the unit of ru_maxrss in bytes: Linux and the BSDs report
// KiB.
const maxRSSUnit = 1024

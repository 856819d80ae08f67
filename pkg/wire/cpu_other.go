//go:build !unix

package wire

// selfCPU reports 0 where getrusage does not exist; bench then shows the
// client's CPU as unknown rather than guessing.
func selfCPU() float64 { return 0 }

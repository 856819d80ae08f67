//go:build !unix

package listener

// DescriptorLimit is 0 where the process has no descriptor limit to read:
// Limits.Resolve then takes a fixed bound.
func DescriptorLimit() uint64 { return 0 }

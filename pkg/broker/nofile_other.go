//go:build !unix

package broker

// descriptorLimit is 0 where the process has no descriptor limit to read:
// connLimits.Resolve then takes a fixed bound.
func descriptorLimit() uint64 { return 0 }

//go:build !linux

package idlecost

// dropCached does nothing off Linux, where the benchmark skips.
func dropCached(string) error { return nil }

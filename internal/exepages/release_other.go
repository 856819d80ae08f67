//go:build !linux

package exepages

// Release does nothing where the process's mappings cannot be read from
// /proc.
func Release() error { return nil }

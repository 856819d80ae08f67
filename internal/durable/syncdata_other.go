//go:build !linux

package durable

import "os"

// SyncData writes f's data to the disk; where there is no fdatasync(2)
// it is f.Sync (fsync).
func SyncData(f *os.File) error { return f.Sync() }

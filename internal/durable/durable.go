// Package durable holds the sync helpers that the storage packages share:
// SyncDir, since a file's creation, rename or hard link survives a crash
// only once its directory is synced as well, and SyncData, the fdatasync
// of a new file's bytes before they are linked into place. It imports
// nothing of the module, so every layer may use it, and it never writes
// data itself.
package durable

import (
	"fmt"
	"os"
)

// SyncDir fsyncs the directory dir, so that entries created, renamed or
// removed in it survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

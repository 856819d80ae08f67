package durable

import (
	"os"

	"golang.org/x/sys/unix"
)

// SyncData writes f's data, and the size needed to read it back, to the
// disk: fdatasync(2). It is for a file whose bytes are all that must
// survive a crash (a new file about to be linked or renamed into place,
// whose directory is synced after): it skips the timestamps fsync would
// also commit, an ext4 journal commit the other streams' syncs queue
// behind.
func SyncData(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

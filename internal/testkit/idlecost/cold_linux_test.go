package idlecost

import (
	"os"

	"golang.org/x/sys/unix"
)

// dropCached asks the kernel to drop path's clean pages from the page
// cache (no process may map it then: it only runs before serve starts).
func dropCached(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

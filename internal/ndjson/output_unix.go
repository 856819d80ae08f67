//go:build unix

package ndjson

import (
	"io/fs"
	"syscall"
)

// fileID returns the device and inode of a file, which tell it from
// another put at its path.
func fileID(info fs.FileInfo) (dev, ino uint64) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino)
	}
	return 0, 0
}

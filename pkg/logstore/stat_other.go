//go:build !linux

package logstore

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// statStamp stats path. ok=false when it is not there.
func statStamp(path string) (s stamp, ok bool, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return s, false, nil
		}
		return s, false, err
	}
	return stamp{fi.Size(), fi.ModTime().UnixNano()}, true, nil
}

// readHeader reads up to len(buf) bytes at the start of path and returns
// how many it read: -1 when the file is not there.
func readHeader(path string, buf []byte) int {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return -1
	}
	return n
}

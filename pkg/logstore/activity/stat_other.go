//go:build !linux

package activity

import (
	"errors"
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

// readHeader reads len(buf) bytes at the start of path. ok=false when the
// file is not there or shorter.
func readHeader(path string, buf []byte) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	n, err := f.ReadAt(buf, 0)
	return err == nil && n == len(buf)
}

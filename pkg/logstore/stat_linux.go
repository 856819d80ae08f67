//go:build linux

package logstore

import "syscall"

// statStamp stats path without the allocations of os.Stat (Linux: the
// Stat_t fields differ between systems, and elsewhere os.Stat serves): a pass over
// thousands of idle logs does little else. ok=false when it is not there.
func statStamp(path string) (s stamp, ok bool, err error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		if err == syscall.ENOENT {
			return s, false, nil
		}
		return s, false, err
	}
	return stamp{st.Size, st.Mtim.Nano()}, true, nil
}

// readHeader reads up to len(buf) bytes at the start of path, without
// registering the file with the runtime's poller as os.Open does, and
// returns how many it read: -1 when the file is not there.
func readHeader(path string, buf []byte) int {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	n, err := syscall.Pread(fd, buf, 0)
	_ = syscall.Close(fd)
	if err != nil {
		return -1
	}
	return n
}

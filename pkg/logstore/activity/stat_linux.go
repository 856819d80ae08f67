//go:build linux

package activity

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

// readHeader reads len(buf) bytes at the start of path, without
// registering the file with the runtime's poller as os.Open does.
// ok=false when the file is not there or shorter.
func readHeader(path string, buf []byte) bool {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	n, err := syscall.Pread(fd, buf, 0)
	_ = syscall.Close(fd)
	return err == nil && n == len(buf)
}

package exepages

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// Release drops this process's resident mappings of its executable's
// read-only pages.
func Release() error {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return fmt.Errorf("find this process's executable: %w", err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return fmt.Errorf("read this process's mappings: %w", err)
	}
	for _, line := range bytes.Split(maps, []byte("\n")) {
		start, end, ok := readOnlyMapping(line, exe)
		if !ok {
			continue
		}
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, start, end-start, syscall.MADV_DONTNEED); errno != 0 {
			return fmt.Errorf("give back the pages of %s at %#x: %w", exe, start, errno)
		}
	}
	return nil
}

// readOnlyMapping parses one line of /proc/self/maps ("start-end perms
// offset dev inode path") and reports its range when it maps path
// privately and without write permission.
func readOnlyMapping(line []byte, path string) (start, end uintptr, ok bool) {
	fields := bytes.SplitN(line, []byte(" "), 6)
	if len(fields) < 6 {
		return 0, 0, false
	}
	// The path is the rest of the line after the padding, and may hold
	// spaces itself.
	if string(bytes.TrimLeft(fields[5], " ")) != path {
		return 0, 0, false
	}
	perms := fields[1]
	if len(perms) != 4 || perms[1] != '-' || perms[3] != 'p' {
		return 0, 0, false
	}
	lo, hi, found := bytes.Cut(fields[0], []byte("-"))
	if !found {
		return 0, 0, false
	}
	s, err1 := strconv.ParseUint(string(lo), 16, 64)
	e, err2 := strconv.ParseUint(string(hi), 16, 64)
	if err1 != nil || err2 != nil || e <= s {
		return 0, 0, false
	}
	return uintptr(s), uintptr(e), true
}

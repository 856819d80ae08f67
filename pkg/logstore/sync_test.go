package logstore

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
	"modernc.org/sqlite"
)

func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// TestOpeningALogCommitsWithFdatasync checks that a log's commits sync with
// fdatasync, not fsync: the setting is modernc's and process-wide, so the
// test turns it off first and expects opening a log to turn it back on.
func TestOpeningALogCommitsWithFdatasync(t *testing.T) {
	if _, err := sqlite.Fdatasync(false); err != nil {
		t.Skipf("this platform has no fdatasync: %v", err)
	}
	createLog(t, mustCompile(t, tradeSchema), Config{})
	if !sqlite.FdatasyncEnabled() {
		t.Fatal("a log was opened and SQLite still commits with fsync")
	}
}

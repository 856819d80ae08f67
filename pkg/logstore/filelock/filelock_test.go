package filelock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestTryRefusesASecondHolderUntilRelease: while a lock is held, another
// Try on the file fails at once with a *HeldError naming the holder's pid;
// once released, the next Try takes it.
func TestTryRefusesASecondHolderUntilRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	first, err := Try(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Try(path)
	var held *HeldError
	if !errors.As(err, &held) || held.PID != os.Getpid() || held.Path != path {
		t.Fatalf("second Try: %v, want a HeldError naming pid %d", err, os.Getpid())
	}
	first.Release()
	first.Release() // a second Release does nothing
	again, err := Try(path)
	if err != nil {
		t.Fatalf("Try after Release: %v", err)
	}
	again.Release()
	var none *Lock
	none.Release() // nor does one on nil
}

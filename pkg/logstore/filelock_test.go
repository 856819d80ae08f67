package logstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestTryRefusesASecondHolderUntilRelease: while a lock is held, another
// Try on the file fails at once with ErrHeld, and Holder names the pid;
// once released, the next Try takes it.
func TestTryRefusesASecondHolderUntilRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	first, err := Try(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = Try(path); !errors.Is(err, ErrHeld) || Holder(path) != os.Getpid() {
		t.Fatalf("second Try: %v, holder %d; want ErrHeld and pid %d", err, Holder(path), os.Getpid())
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

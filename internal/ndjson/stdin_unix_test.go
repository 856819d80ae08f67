//go:build unix

package ndjson

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestInterruptibleLetsALoadStopWhileABlockingPipeIsQuiet(t *testing.T) {
	// A pipe made with blocking descriptors, as a shell hands stdin over:
	// the runtime cannot interrupt a Read of it.
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "writer")
	defer r.Close()
	defer w.Close()
	in, release := Interruptible(r)
	err := loadFromQuietInput(t, in, func(s string) { _, _ = w.WriteString(s) })
	if !errors.Is(err, ErrInterrupted) {
		t.Errorf("err %v, want an interrupted load", err)
	}
	if n := readerGoroutines(); n != 0 {
		t.Errorf("%d reader goroutines still run after Load returned", n)
	}
	release()
	// The descriptor is shared with whoever handed it over (a shell's
	// terminal): it is left blocking again, as it came.
	if flags, err := unix.FcntlInt(uintptr(fds[0]), unix.F_GETFL, 0); err != nil || flags&unix.O_NONBLOCK != 0 {
		t.Errorf("after release the input's flags are %#x (%v); want O_NONBLOCK cleared again", flags, err)
	}
}

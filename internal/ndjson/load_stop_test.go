package ndjson

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// loadFromQuietInput starts a Load of in (which sends one row, then stays
// open and silent), waits until the server has that row, stops the load by
// its context, and returns Load's error. It fails the test if Load does not
// return within 10 s of the stop.
func loadFromQuietInput(t *testing.T, in io.Reader, write func(string)) error {
	t.Helper()
	url, frames := markServer(t, 0, func(string) string { return `{"ok":[7]}` })
	ctx, stop := context.WithCancel(ctxT(t))
	defer stop()
	done := make(chan error, 1)
	go func() {
		_, err := Load(ctx, url+"/t", loadDefaults(LoadOptions{Stdin: in}))
		done <- err
	}()
	write("{\"side\":1}\n")
	waitUntil(t, "the first row to reach the server", func() bool { return len(frames()) == 1 })
	stop()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Load did not return within 10 s of its context ending while its input was quiet")
		return nil
	}
}

// readerGoroutines counts goroutines running the loader's reader.
func readerGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "ndjson.(*loader).read(")
}

func TestLoadStoppedWhileStdinIsQuietLeavesNoReaderBehind(t *testing.T) {
	r, w, err := os.Pipe() // pollable: Load can end a blocked Read through its deadline
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close() // open for the whole load: the input never ends by itself
	err = loadFromQuietInput(t, r, func(s string) { _, _ = w.WriteString(s) })
	if !errors.Is(err, ErrInterrupted) {
		t.Errorf("err %v, want an interrupted load", err)
	}
	// Checked at once, with no grace period: Load must have waited for its
	// reader before returning.
	if n := readerGoroutines(); n != 0 {
		t.Fatalf("%d reader goroutines still run after Load returned", n)
	}
	// The input is handed back without the deadline Load used to stop it.
	go func() { _, _ = w.WriteString("x") }()
	b := make([]byte, 1)
	if _, err := r.Read(b); err != nil {
		t.Errorf("reading the input after Load: %v; want the deadline cleared", err)
	}
}

package logstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// descriptorsUnder lists the files under dir that this process holds open
// (Linux: /proc/self/fd).
func descriptorsUnder(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("reads /proc/self/fd: %v", err)
	}
	var out []string
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			out = append(out, filepath.Base(target))
		}
	}
	return out
}

// waitUntil polls cond until it holds, failing after limit: the idle
// close runs on a timer of its own.
func waitUntil(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAnIdleLogHoldsOnlyItsLock: a writer opened WithIdleClose lets its
// SQLite connections go once unused, so it holds one descriptor, its lock
// file; the next append and the next read open them again, and the
// offsets stay dense (I1) and the writer keeps its lock (I7) throughout.
func TestAnIdleLogHoldsOnlyItsLock(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts descriptors in /proc/self/fd")
	}
	const idle = 50 * time.Millisecond
	l := createLog(t, schemaAny(), Config{}, WithIdleClose(idle))
	ctx := context.Background()
	dir, err := filepath.EvalSymlinks(l.Dir())
	if err != nil {
		t.Fatal(err)
	}
	onlyLock := func() bool {
		fds := descriptorsUnder(t, dir)
		return l.OpenConns() == 0 && len(fds) == 1 && fds[0] == lockFile
	}
	waitUntil(t, fmt.Sprintf("a fresh log still holds %v", descriptorsUnder(t, dir)), 30*time.Second, onlyLock)

	want := expectation{}
	for round := range 3 {
		rows := batch(fmt.Sprint("r", round), 5)
		first, err := l.Append(ctx, rows, int64(round), nil)
		if err != nil {
			t.Fatalf("append after an idle spell: %v", err)
		}
		if wantFirst := int64(1 + 5*round); first != wantFirst {
			t.Fatalf("round %d: append took offset %d, want %d", round, first, wantFirst)
		}
		want.add(first, int64(round), rows)
		if l.OpenConns() == 0 {
			t.Fatal("an append just ran and the log holds no connection")
		}
		if err := want.check(scanAll(t, l, 1, first+5), 1, first+5); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, fmt.Sprintf("round %d: an idle log still holds %v", round, descriptorsUnder(t, dir)), 30*time.Second, onlyLock)
		// The lock is still the writer's: another writer is refused.
		if other, err := Open(l.Dir(), Writer); err == nil {
			other.Close()
			t.Fatal("a second writer opened an idle log")
		}
	}
	// A read alone (a subscriber's replay of a quiet stream) opens a
	// reader, and the reader goes too.
	if err := want.check(scanAll(t, l, 1, 16), 1, 16); err != nil {
		t.Fatal(err)
	}
	if l.OpenConns() == 0 {
		t.Fatal("a read just ran and the log holds no connection")
	}
	waitUntil(t, fmt.Sprintf("after a read, an idle log still holds %v", descriptorsUnder(t, dir)), 30*time.Second, onlyLock)
}

// TestActivityIgnoresOpensAndClosesOfAQuietLog: the fingerprint the
// maintenance children compare (ReadActivity) stays the same while
// processes open and close a log that nobody writes to, as serve's idle
// close and the children's visits do in turn, and moves with a commit.
// Were it to move on an open or a close, the children would reopen every
// idle log on every pass.
func TestActivityIgnoresOpensAndClosesOfAQuietLog(t *testing.T) {
	l := createLog(t, schemaAny(), Config{})
	dir := l.Dir()
	if _, err := l.Append(context.Background(), batch("a", 3), 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	quiet, err := ReadActivity(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, mode := range []Mode{Maintainer, ReadOnly, Writer, Maintainer} {
		o, err := Open(dir, mode)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := o.Extent(context.Background()); err != nil {
			t.Fatal(err)
		}
		// Another process looks while this one has the log open.
		if a, err := ReadActivity(dir); err != nil || a != quiet {
			t.Fatalf("open %d (%s), no commit: the fingerprint moved (%v)", i, mode, err)
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		if a, err := ReadActivity(dir); err != nil || a != quiet {
			t.Fatalf("open and close %d (%s), no commit: the fingerprint moved (%v)", i, mode, err)
		}
	}
	w, err := Open(dir, Writer)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Append(context.Background(), batch("b", 1), 2, nil); err != nil {
		t.Fatal(err)
	}
	if a, err := ReadActivity(dir); err != nil || a == quiet {
		t.Fatalf("a commit left the fingerprint as it was (%v)", err)
	}
}

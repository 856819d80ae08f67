package abuse

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFullDiskRefusesRowsAndRecovers serves from an 8 MiB tmpfs, fills it
// while publishers run, then frees it. While it is full the server answers
// commit_failed naming the cause, keeps its connections, and loses no row it
// acknowledged; once space returns it takes rows again. Mounting needs
// root: the test is skipped, saying so, for anyone else.
func TestFullDiskRefusesRowsAndRecovers(t *testing.T) {
	t.Parallel() // its own server process; see TestMain
	if os.Geteuid() != 0 {
		t.Skip("filling a disk needs a small tmpfs, and mounting one needs root; run this test as root to include it")
	}
	mnt := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount an 8 MiB tmpfs even as root (a container without CAP_SYS_ADMIN?): %v: %s", err, out)
	}
	// Registered before the server's cleanup, so it runs after the server
	// has stopped.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	s := start(t, options{root: filepath.Join(mnt, "data")})
	l := startLoad(t, s, 2, 20)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return l.count() >= 1000, fmt.Sprintf("%d rows acknowledged", l.count())
	})
	base := s.baseline()

	// Fill what is left.
	ballast := filepath.Join(mnt, "ballast")
	fill, err := os.Create(ballast)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := fill.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill the tmpfs: %v", err)
			}
			break
		}
	}
	_ = fill.Close()
	failedBefore := l.failures()
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return l.failures() > failedBefore+10, fmt.Sprintf("%d frames refused since the disk filled", l.failures()-failedBefore)
	})
	errs := l.errors()
	named := false
	for _, e := range errs {
		if strings.HasPrefix(e, "commit_failed: ") && strings.Contains(e, "full") {
			named = true
		}
	}
	if !named {
		t.Errorf("with the disk full, no commit_failed reply said so: %q", errs)
	}
	t.Logf("refusals while full: %q", errs)
	s.within("with the disk full", base, bound{rss: 64 << 20, fds: 4})

	// Space returns: rows are taken again.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	before := l.count()
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return l.count() >= before+1000, fmt.Sprintf("after space returned: %d rows acknowledged, %d before", l.count(), before)
	})
	t.Logf("rows taken again")
	l.stop()
	t.Logf("load stopped")
	verifyAcked(t, s, l.acked)
}

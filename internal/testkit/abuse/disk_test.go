package abuse

import (
	"errors"
	"fmt"
	"os"
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
	mnt := smallDisk(t, "8m")
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

// Package testbin builds the streamcast command once per test binary, for
// the tests that run it as a real process (serve, and the maintenance
// children serve forks). It imports nothing of the module, so any package's
// tests may use it, pkg/broker's own included, which cannot import
// internal/brokertest (that imports pkg/broker). It is imported by tests
// only, never by the product.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// built is the binary Streamcast built: one per test binary, so the only
// state here lives as long as the process and is written once.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Streamcast builds the streamcast command from this module (once per test
// binary) and returns its path. The real command, not the test binary
// posing as one: the tests then drive the command lines serve renders
// against the flags `streamcast maintain` really parses. A -short run skips
// the test: it starts child processes. The binary lives in a temporary
// directory until Remove (a TestMain calls it after m.Run).
func Streamcast(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts child processes")
	}
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "streamcast-testbin-")
		if built.err != nil {
			return
		}
		built.path, built.err = Build(built.dir)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// Build builds the streamcast command from this module into dir and
// returns its path. It is safe from any goroutine, so a test can build
// while it starts something else; most tests want Streamcast, which builds
// once per test binary.
func Build(dir string) (string, error) {
	path := filepath.Join(dir, "streamcast")
	out, err := exec.Command("go", "build", "-o", path, "github.com/streamcast/streamcast").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build the streamcast command: %w\n%s", err, out)
	}
	return path, nil
}

// Remove deletes the binary Streamcast built, if it built one. Call it from
// TestMain once m.Run has returned, when no test runs the binary any more.
func Remove() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}

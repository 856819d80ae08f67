// The streamcast command, built once per test binary, for the tests that
// run it as a real process (serve, and the maintenance children serve
// forks). pkg/broker's own tests use it, which cannot import brokertest
// (that imports pkg/broker).

package testkit

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
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
// directory until RemoveStreamcast (a TestMain calls it after m.Run).
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
		built.path, built.err = BuildStreamcast(built.dir)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// BuildStreamcast puts a streamcast command built from this module into dir and
// returns its path. It is safe from any goroutine, so a test can build
// while it starts something else; most tests want Streamcast, which builds
// once per test binary.
//
// The link is the expensive part (seconds of CPU for a 100 MB binary), and
// `go build -o` skips it when its target is already up to date, so the
// build goes to one place per checkout under the user's cache directory,
// shared by every test package and every run, and dir gets a copy. A lock
// file serialises the packages `go test ./...` runs side by side. That one
// binary (and its lock) is all the tests leave behind, like Go's own build
// cache; deleting it costs only the next run's link.
func BuildStreamcast(dir string) (string, error) {
	shared, err := sharedDir()
	if err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(shared, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", fmt.Errorf("open the test binary's build lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	// Held through the copy, so no other package's build rewrites the
	// binary under it.
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	built := filepath.Join(shared, "streamcast")
	out, err := exec.Command("go", "build", "-o", built, "github.com/streamcast/streamcast").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build the streamcast command: %w\n%s", err, out)
	}
	path := filepath.Join(dir, "streamcast")
	if err := copyExecutable(path, built); err != nil {
		return "", err
	}
	return path, nil
}

// sharedDir is where BuildStreamcast keeps its one binary for the module this test
// runs in: a directory under the user's cache directory (or the temporary
// one, when that cannot be made) named after a hash of the module's path,
// so two checkouts on one machine do not relink over each other.
func sharedDir() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(root))
	name := filepath.Join("streamcast-testbin", hex.EncodeToString(sum[:6]))
	var bases []string
	if base, err := os.UserCacheDir(); err == nil {
		bases = append(bases, base)
	}
	// A CI runner's home may be read-only; the temporary directory is not.
	bases = append(bases, os.TempDir())
	for _, base := range bases {
		dir := filepath.Join(base, name)
		if err = os.MkdirAll(dir, 0o755); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("make the test binary's cache directory: %w", err)
}

// moduleRoot is the directory holding the go.mod above the working
// directory, which go test sets to the package's own.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run the tests with go test inside the module")
		}
		dir = parent
	}
}

func copyExecutable(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("copy the test binary: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy the test binary to %s: %w", dst, err)
	}
	return out.Close()
}

// RemoveStreamcast deletes the binary Streamcast built, if it built one. Call it from
// TestMain once m.Run has returned, when no test runs the binary any more.
func RemoveStreamcast() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}

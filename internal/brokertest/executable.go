package brokertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// built is the streamcast binary Executable built, once per test binary.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Executable builds the streamcast command once per test binary and
// returns its path, for a server whose maintenance children are real
// processes (broker.Options.Executable). The binary lives in a temporary
// directory that outlives the test; the OS cleans it. A -short run skips
// the test: it starts child processes.
func Executable(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts child processes")
	}
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "streamcast-brokertest-")
		if built.err != nil {
			return
		}
		path := filepath.Join(built.dir, "streamcast")
		out, err := exec.Command("go", "build", "-o", path, "github.com/streamcast/streamcast").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build the streamcast command: %w\n%s", err, out)
			return
		}
		built.path = path
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

package brokertest

import (
	"testing"

	"github.com/streamcast/streamcast/internal/testkit"
)

// Executable returns the streamcast command built once per test binary
// (testkit.Streamcast), for a server whose maintenance children are real
// processes (broker.Options.Executable). A -short run skips the test: it
// starts child processes. A TestMain that calls testkit.RemoveStreamcast
// after m.Run deletes the binary; otherwise it stays in the temporary
// directory.
func Executable(t testing.TB) string {
	t.Helper()
	return testkit.Streamcast(t)
}

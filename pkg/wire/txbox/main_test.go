package txbox

import (
	"os"
	"testing"

	"github.com/streamcast/streamcast/internal/pgtest"
)

// testPG is the package's one PostgreSQL server, started by the first test
// that asks for it (testPG.Get(t).NewDB(t) gives a test its own database),
// and stopped when the tests end.
var testPG pgtest.Shared

// TestMain runs the package's tests, or, when a crash test re-executes this
// binary as the application, that application (see crashChild).
func TestMain(m *testing.M) {
	if role := os.Getenv(crashRoleEnv); role != "" {
		os.Exit(crashChild(role))
	}
	code := m.Run()
	testPG.Stop()
	os.Exit(code)
}

package testkit

import (
	"os"
	"runtime/debug"
)

// RelaxGC sets a test binary's collector percentage to 400, unless GOGC
// is set. The packages whose tests run the product in their own process
// allocate heavily and do not measure their own memory, so the default
// headroom only costs CPU: about a seventh of pkg/logstore's. A TestMain
// calls it first, so the test binary's helper children get it too.
func RelaxGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

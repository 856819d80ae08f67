// How hard tests push: the long crash and soak loops (SIGKILL iterations,
// exactly-once under fire) run a few rounds locally, so the README's
// `go test ./...` stays within its budget, and at full count in CI, where
// .ci/run sets STREAMCAST_SOAK=full.

package testkit

import (
	"os"
	"testing"
)

// SoakEnv is the variable that selects the full counts. .ci/run sets it to "full".
const SoakEnv = "STREAMCAST_SOAK"

// SoakFull reports whether the long loops run at full count: STREAMCAST_SOAK=full
// and not -short (the race run stays short whatever the variable says).
func SoakFull() bool {
	return os.Getenv(SoakEnv) == "full" && !testing.Short()
}

// SoakCount returns full when SoakFull, else local: the number of iterations of a
// crash or soak loop.
func SoakCount(local, full int) int {
	if SoakFull() {
		return full
	}
	return local
}

// SoakCountShort is SoakCount with a third, smaller count for -short, which is how
// CI's race run goes: there each child process a loop restarts is a
// race-built test binary, and the loop is after data races, not numbers.
func SoakCountShort(short, local, full int) int {
	if testing.Short() {
		return short
	}
	return SoakCount(local, full)
}

// Package soak tells tests how hard to push: the long crash and soak loops
// (SIGKILL iterations, exactly-once under fire) run a few rounds locally, so
// the README's `go test ./...` stays within its budget, and at full count in
// CI, where .ci/run sets STREAMCAST_SOAK=full. It is imported by tests only
// and never by the product.
package soak

import (
	"os"
	"testing"
)

// Env is the variable that selects the full counts. .ci/run sets it to "full".
const Env = "STREAMCAST_SOAK"

// Full reports whether the long loops run at full count: STREAMCAST_SOAK=full
// and not -short (the race run stays short whatever the variable says).
func Full() bool {
	return os.Getenv(Env) == "full" && !testing.Short()
}

// Count returns full when Full, else local: the number of iterations of a
// crash or soak loop.
func Count(local, full int) int {
	if Full() {
		return full
	}
	return local
}

// CountShort is Count with a third, smaller count for -short, which is how
// CI's race run goes: there each child process a loop restarts is a
// race-built test binary, and the loop is after data races, not numbers.
func CountShort(short, local, full int) int {
	if testing.Short() {
		return short
	}
	return Count(local, full)
}

package testkit

import (
	"flag"
	"os"
	"runtime/debug"
)

// RelaxGC sets a test binary's collector percentage to 400, unless GOGC
// is set or benchmarks run (their figures are the product's, measured at
// its own setting). The packages whose tests run the product in their own
// process allocate heavily and do not measure their own memory, so the
// default headroom only costs CPU: about a seventh of pkg/logstore's. A
// TestMain calls it once it has dispatched its helper children, which run
// as the product does (some measure their own memory).
func RelaxGC() {
	if benchmarking() {
		return
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// RelaxChildrenGC sets GOGC=400 in the environment of the processes a
// test binary starts from then on (a streamcast serve and its maintenance
// children, which keep an operator's GOGC), unless GOGC is set or
// benchmarks run. Only the packages whose tests check what those
// processes do, never their memory, call it.
func RelaxChildrenGC() {
	if benchmarking() {
		return
	}
	if os.Getenv("GOGC") == "" {
		os.Setenv("GOGC", "400")
	}
}

// benchmarking reports whether the test binary was asked to run
// benchmarks (-test.bench), parsing its flags if TestMain has not yet.
func benchmarking() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	b := flag.Lookup("test.bench")
	return b != nil && b.Value.String() != ""
}

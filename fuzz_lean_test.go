package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// heavyFuzzTests are the packages with a fuzz target whose tests may link
// far more than the package itself, and why; docs/fuzzing.md gives their
// campaign rates.
var heavyFuzzTests = map[string]string{
	// Its tests run the outbox and inbox against a real broker, through
	// unexported parts of txbox; they cannot move to another package.
	"pkg/wire/txbox": "outbox and inbox tests drive a real broker",
}

// leanSlack is how many packages beyond its own a fuzzed package's test
// binary may link: test helpers and a few standard packages.
const leanSlack = 40

// TestFuzzedPackagesTestsLinkLittleMore keeps fuzz campaigns fast. A fuzz
// execution's cost is dominated by Go's coverage bookkeeping, which spans
// every package the test binary links, not just the code the target runs:
// pkg/wire's parsers ran 7 times slower while wire's end-to-end tests,
// which start a broker, were in its test binary. So a package with a fuzz
// target keeps tests that need a heavier package elsewhere (pkg/wire/wiretest),
// and this fails when its tests link many more packages than it does.
func TestFuzzedPackagesTestsLinkLittleMore(t *testing.T) {
	pkgs := listPackages(t)
	byPath := map[string]listedPackage{}
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	fuzzed := 0
	for _, p := range pkgs {
		if !hasFuzzTarget(t, p) {
			continue
		}
		fuzzed++
		own := map[string]bool{p.ImportPath: true}
		for _, d := range p.Deps {
			own[d] = true
		}
		linked := map[string]bool{}
		for _, imp := range append(p.TestImports, p.XTestImports...) {
			if own[imp] {
				continue
			}
			linked[imp] = true
			for _, d := range byPath[imp].Deps {
				linked[d] = true
			}
		}
		var extra []string
		for d := range linked {
			if !own[d] {
				extra = append(extra, d)
			}
		}
		rel := filepath.ToSlash(p.ImportPath[min(len(p.ImportPath), len(module)+1):])
		if why, ok := heavyFuzzTests[rel]; ok {
			t.Logf("%s: its tests link %d more packages (%s)", rel, len(extra), why)
			continue
		}
		if len(extra) > leanSlack {
			t.Errorf("%s holds a fuzz target, and its tests link %d packages it does not (more than %d), which slows every fuzz execution (docs/fuzzing.md); move the tests that need them to a package of their own, as pkg/wire/wiretest is for wire", rel, len(extra), leanSlack)
		}
	}
	if fuzzed < 10 {
		t.Fatalf("found %d packages with fuzz targets; expected the module's (is go list's output complete?)", fuzzed)
	}
}

// hasFuzzTarget reports whether one of p's test files declares a fuzz target.
func hasFuzzTarget(t *testing.T, p listedPackage) bool {
	t.Helper()
	for _, f := range append(p.TestGoFiles, p.XTestGoFiles...) {
		b, err := os.ReadFile(filepath.Join(p.Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.HasPrefix(b, []byte("func Fuzz")) || bytes.Contains(b, []byte("\nfunc Fuzz")) {
			return true
		}
	}
	return false
}

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// heavyFuzzTests are the packages with a fuzz target whose tests may link
// far more than the package itself, and why; docs/fuzzing.md gives their
// campaign rates.
// None now: pkg/wire/txbox, whose outbox and inbox tests drive a real broker
// through its unexported parts, was one until its DSN parser, the fuzzed
// code, moved to pkg/wire/txbox/dsn.
var heavyFuzzTests = map[string]string{}

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

// leafParsers are packages that exist so that a parser's fuzz target links a
// small test binary: each was split out of a package that links the storage
// stack (docs/fuzzing.md, "Why a campaign is slow"). The guard above only
// sees what a package's tests add; this one also fails when the package
// itself comes to import something heavy.
var leafParsers = []string{
	"pkg/broker/control/ctlreq",
	"pkg/logstore/maintain/maintainargs",
	"pkg/logstore/publoc",
	"pkg/logstore/replica/replicaargs",
	"pkg/logstore/rowpack",
	"pkg/meta/maxage",
	"pkg/wire/txbox/dsn",
}

// leafParserMaxLinked is the most packages a leaf parser's test binary may
// link, the standard library's included: a leaf links about 130, the
// storage stack about 700.
const leafParserMaxLinked = 250

// TestLeafParsersStayLeaves fails when the test binary of a leaf parser
// package links more than leafParserMaxLinked packages, which would make
// its fuzz campaign several times slower again.
func TestLeafParsersStayLeaves(t *testing.T) {
	for _, rel := range leafParsers {
		out, err := exec.Command("go", "list", "-deps", "-test", "./"+rel).Output()
		if err != nil {
			t.Fatalf("go list -deps -test ./%s: %v", rel, err)
		}
		if n := strings.Count(string(out), "\n"); n > leafParserMaxLinked {
			t.Errorf("%s's tests link %d packages (more than %d): it was split out so that its fuzz target links little (docs/fuzzing.md); find the import that pulls in the rest (go list -deps) and keep it out", rel, n, leafParserMaxLinked)
		}
	}
}

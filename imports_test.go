package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/streamcast/streamcast"

// A layer is one floor of docs/design.md §3. Imports point down: a package
// may import any package of a lower rank, one of its own layer only inside
// its own family, and never one of a higher rank. storage and protocol
// share a rank: they are siblings that never import each other.
type layer struct {
	name string
	rank int
	// pkgs are paths relative to the module ("" is the main package);
	// "x/..." is x and every package below it.
	pkgs []string
}

var layers = []layer{
	{"base", 0, []string{"internal/durable", "internal/exepages", "internal/ratelog", "internal/rusage", "internal/waitfor"}},
	{"schema", 1, []string{"pkg/schema/..."}},
	{"storage", 2, []string{"pkg/logstore/..."}},
	{"protocol", 2, []string{"pkg/wire/...", "internal/ndjson"}},
	{"meta", 3, []string{"pkg/meta/..."}},
	{"broker", 4, []string{"pkg/broker/..."}},
	{"commands", 5, []string{"cmd", "internal/loadgen"}},
	{"top", 6, []string{"", "internal/gendocs", "internal/typecheck"}},
}

// testOnly are the harnesses and suites that only tests may import: no
// package's own (non-test) files import one, other than another of them.
// They may import any layer, to drive a real server.
var testOnly = []string{"internal/testkit/...", "testscript", "pkg/wire/wiretest"}

// joins puts a package outside pkg/ into a family of its layer: the NDJSON
// tools (tail, publish, cursor files) are built on wire's client, and the
// load generator is the engine of the bench command.
var joins = map[string]string{
	"internal/ndjson":  "pkg/wire",
	"internal/loadgen": "cmd",
}

const layerOrder = "base < schema < {storage, protocol} < meta < broker < commands < top"

// matches reports whether pkg is one of pats ("x/..." covering x's tree).
func matches(pkg string, pats []string) bool {
	for _, p := range pats {
		if tree, ok := strings.CutSuffix(p, "/..."); ok {
			if pkg == tree || strings.HasPrefix(pkg, tree+"/") {
				return true
			}
		} else if pkg == p {
			return true
		}
	}
	return false
}

func isTestOnly(pkg string) bool { return matches(pkg, testOnly) }

// layerOf returns pkg's layer, or nil when no layer holds it.
func layerOf(pkg string) *layer {
	for i := range layers {
		if matches(pkg, layers[i].pkgs) {
			return &layers[i]
		}
	}
	return nil
}

// family is the pkg/<name> tree pkg belongs to, or pkg itself outside pkg/.
func family(pkg string) string {
	if f, ok := joins[pkg]; ok {
		return f
	}
	if rest, ok := strings.CutPrefix(pkg, "pkg/"); ok {
		name, _, _ := strings.Cut(rest, "/")
		return "pkg/" + name
	}
	return pkg
}

// name is how messages spell a module-relative path.
func name(pkg string) string {
	if pkg == "" {
		return "main"
	}
	return pkg
}

// checkImport returns why from (a path relative to the module, "" for
// main) may not import imp, or "" when it may. test says the import is in
// a _test file: tests may import any package (a test drives a real
// server), but cmd only from the top layer and testscript, which runs the
// command tree.
func checkImport(from, imp string, test bool) string {
	if imp != module && !strings.HasPrefix(imp, module+"/") {
		return "" // the standard library and dependencies
	}
	to := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
	if to == from {
		return ""
	}
	if test {
		if to == "cmd" && from != "testscript" {
			if l := layerOf(from); l == nil || l.name != "top" {
				return fmt.Sprintf("%s's tests import cmd; only the top layer (main, internal/gendocs) and testscript's tests may: nothing depends on the command tree", name(from))
			}
		}
		return ""
	}
	if isTestOnly(to) {
		if isTestOnly(from) {
			return ""
		}
		return fmt.Sprintf("%s imports %s, a test-only package, from a non-test file; only _test files (and the other test harnesses) may import %s", name(from), to, strings.Join(testOnly, ", "))
	}
	if isTestOnly(from) {
		return ""
	}
	lf, lt := layerOf(from), layerOf(to)
	switch {
	case lf == nil:
		return fmt.Sprintf("%s is in no layer; add it to a layer of imports_test.go (docs/design.md §3)", name(from))
	case lt == nil:
		return fmt.Sprintf("%s imports %s, which is in no layer; add it to a layer of imports_test.go (docs/design.md §3)", name(from), to)
	case lt.rank < lf.rank:
		return ""
	case lt.rank > lf.rank:
		return fmt.Sprintf("%s (layer %s) imports %s (layer %s): an arrow upward; imports point down, %s (docs/design.md §3)", name(from), lf.name, to, lt.name, layerOrder)
	case lt.name != lf.name:
		return fmt.Sprintf("%s (layer %s) imports %s (layer %s): %s and %s are siblings that never import each other (docs/design.md §3)", name(from), lf.name, to, lt.name, lf.name, lt.name)
	case family(from) != family(to):
		return fmt.Sprintf("%s imports %s, a sideways arrow inside layer %s: within a layer a package imports only its own family (%s is %s's, %s is %s's) (docs/design.md §3)", name(from), to, lf.name, name(from), family(from), to, family(to))
	}
	return ""
}

type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
}

// TestImportsPointDown lists every package of the module with one
// `go list` and fails on an import that runs against the layers of
// docs/design.md §3, and on a package that no layer holds.
func TestImportsPointDown(t *testing.T) {
	pkgs := listPackages(t)
	seen := map[string]bool{}
	fail := func(msg string) {
		if msg != "" && !seen[msg] {
			seen[msg] = true
			t.Error(msg)
		}
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages of %s; expected the whole module", len(pkgs), module)
	}
	for _, p := range pkgs {
		from := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if layerOf(from) == nil && !isTestOnly(from) {
			fail(fmt.Sprintf("%s is in no layer; add it to a layer of imports_test.go (docs/design.md §3)", name(from)))
		}
		for _, imp := range p.Imports {
			fail(checkImport(from, imp, false))
		}
		for _, imp := range append(p.TestImports, p.XTestImports...) {
			fail(checkImport(from, imp, true))
		}
		if p.Error != nil {
			fail(fmt.Sprintf("go list: %s: %s", name(from), p.Error.Err))
		}
	}
}

// TestImportRulesCatchWrongArrows shows the checker refuses each kind of
// wrong arrow, so a green TestImportsPointDown means something.
func TestImportRulesCatchWrongArrows(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		test     bool
		ok       bool
	}{
		// down
		{"pkg/schema", "pkg/schema/jsontext", false, true},
		{"pkg/logstore", "internal/durable", false, true},
		{"pkg/logstore", "pkg/schema", false, true},
		{"pkg/wire", "pkg/schema", false, true},
		{"pkg/meta/history", "pkg/wire", false, true},
		{"pkg/meta", "pkg/logstore", false, true},
		{"pkg/broker", "pkg/meta/config", false, true},
		{"cmd", "pkg/broker", false, true},
		{"internal/loadgen", "pkg/broker", false, true},
		{"", "cmd", false, true},
		{"internal/gendocs", "cmd", false, true},
		{"internal/loadgen", "internal/ndjson", false, true},
		// inside one family, and the joined ones
		{"pkg/logstore", "pkg/logstore/warehouse", false, true},
		{"pkg/logstore/replica", "pkg/logstore", false, true},
		{"pkg/broker", "pkg/broker/supervise", false, true},
		{"pkg/meta/config", "pkg/meta", false, true},
		{"internal/ndjson", "pkg/wire", false, true},
		{"cmd", "internal/loadgen", false, true},
		// up
		{"pkg/schema", "pkg/wire", false, false},
		{"pkg/schema", "pkg/logstore", false, false},
		{"pkg/logstore", "pkg/meta", false, false},
		{"pkg/wire", "pkg/meta", false, false},
		{"pkg/wire", "pkg/broker", false, false},
		{"pkg/meta/config", "pkg/broker", false, false},
		{"pkg/broker", "internal/loadgen", false, false},
		{"pkg/broker", "cmd", false, false},
		{"internal/durable", "pkg/schema", false, false},
		// sideways
		{"pkg/logstore", "pkg/wire", false, false},
		{"pkg/wire", "pkg/logstore/warehouse", false, false},
		{"internal/ndjson", "pkg/logstore", false, false},
		{"internal/durable", "internal/waitfor", false, false},
		{"internal/gendocs", "internal/typecheck", false, false},
		// tests and test-only packages
		{"pkg/wire", "pkg/broker", true, true},
		{"pkg/logstore", "internal/testkit", true, true},
		{"pkg/logstore", "internal/testkit", false, false},
		{"cmd", "internal/testkit/brokertest", false, false},
		{"internal/testkit/brokertest", "internal/testkit", false, true},
		{"internal/testkit/brokertest", "pkg/broker", false, true},
		{"testscript", "cmd", true, true},
		{"pkg/broker", "cmd", true, false},
		// unplaced
		{"pkg/newthing", "pkg/schema", false, false},
		{"pkg/broker", "internal/newthing", false, false},
	} {
		msg := checkImport(tc.from, module+"/"+tc.to, tc.test)
		if (msg == "") != tc.ok {
			t.Errorf("%s → %s (test %v): allowed=%v, want %v (%s)", name(tc.from), tc.to, tc.test, msg == "", tc.ok, msg)
		}
	}
}

func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	// -e: a package go list cannot load (an import cycle) is still listed,
	// so its wrong arrow is named beside go list's own error.
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Error", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

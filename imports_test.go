package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/streamcast/streamcast"

// layer ranks the product's packages: a package may import only packages of
// a lower rank (docs/design.md §3). wire and meta share a rank; wire may read
// history through meta, meta never speaks the protocol.
//
// The ranks leave room between them: a sub-package of a layer sits wholly
// below its parent (a rank under the parent's) or wholly above it. The
// sub-packages of broker sit below it and share a rank: none imports
// another, except auth, certs and streamlog, which sit between config and
// broker, relay, between frame and broker, and stats, between supervise and broker.
var layer = map[string]int{
	"pkg/schema/jsontext":                -2, // below schema: schema imports it; it imports nothing of the module
	"pkg/schema":                         0,
	"pkg/schema/source":                  2, // above schema (it imports it), below logstore: ingest's readers and type rules; logstore never imports it
	"pkg/logstore/activity":              5, // below logstore: logstore imports it
	"pkg/logstore/colstats":              5, // below logstore: logstore imports it
	"pkg/logstore/filelock":              5, // below logstore: logstore imports it
	"pkg/logstore/parquetfile":           5, // below logstore: logstore imports it
	"pkg/logstore/publoc":                4, // below warehouse: a published location and its parser; it imports nothing of the module
	"pkg/logstore/rowpack":               4, // below logstore: the codec of a commit group's rows in buffer.db; it imports nothing of the module
	"pkg/logstore/warehouse":             5, // below logstore: logstore imports it
	"pkg/logstore/logconfig":             7, // above parquetfile and warehouse, below logstore: a log's Config
	"pkg/logstore/catalog":               7, // above colstats, below logstore: answers read from buffer.db's records alone
	"pkg/logstore":                       10,
	"pkg/logstore/tier":                  12, // above logstore: its steps work through logstore's record API
	"pkg/logstore/maintain":              15, // above logstore and tier: it runs tier's steps in a loop
	"pkg/logstore/maintain/maintainargs": 4,  // below maintain, config and supervise: the maintain command line and its roles; it imports nothing of the module
	"pkg/logstore/replica":               15, // above logstore: it opens logs read-only
	"pkg/logstore/replica/replicaargs":   4,  // below replica, config and supervise: the replicate command line; it imports nothing of the module
	"pkg/meta/maxage":                    4,  // below meta and cmd: a retention window and its parser; it imports nothing of the module
	"pkg/meta":                           20,
	"pkg/wire":                           20,
	"pkg/meta/lifecycle":                 22, // above meta: it imports meta and opens logs for writing
	"pkg/wire/txbox":                     22, // above wire: the outbox and inbox are built on its client
	"pkg/wire/txbox/dsn":                 4,  // below txbox: a database URL and its parser; it imports nothing of the module
	"pkg/meta/history":                   22, // above meta and wire: it reads published tables and a server's tail
	"pkg/meta/sqlview":                   23, // above history: SQLite virtual table over its scans
	"pkg/broker/backlog":                 25, // below broker: broker imports them
	"pkg/broker/config":                  25,
	"pkg/broker/console":                 25, // below broker: static files the routes serve; it imports nothing of the module
	"pkg/broker/frame":                   25,
	"pkg/broker/inbox":                   25, // below broker: the bounded queue between publishers and the committer
	"pkg/broker/listener":                25, // below broker: the listener and http.Server the routes are served on
	"pkg/broker/marks":                   25,
	"pkg/broker/metrics":                 25,
	"pkg/broker/peerframe":               25,
	"pkg/broker/pubframe":                25,
	"pkg/broker/registry":                25,
	"pkg/broker/replay":                  25,
	"pkg/broker/streamlife":              25, // below broker: a stream's attached connections and its stop and fence states
	"pkg/broker/supervise":               25,
	"pkg/broker/auth":                    27, // above config: it compiles the auth: section
	"pkg/broker/certs":                   27, // above config: it loads the tls: section's files
	"pkg/broker/relay":                   27, // above frame: it builds the frames it hands broker to fan out
	"pkg/broker/stats":                   27, // above supervise: /stats carries its children's figures
	"pkg/broker/streamlog":               27, // above config: it opens a log as the config declares it
	"pkg/broker/control":                 28, // above auth: it checks the control and migrate grants
	"pkg/broker/control/ctlreq":          4,  // below control: a control request's headers and list cursor; it imports nothing of the module
	"pkg/broker/gate":                    28, // above auth: it checks every request against the auth: section
	"pkg/broker":                         30,
	"cmd":                                40,
}

// leafUtilities are internal packages that import nothing of the module
// (not part of any layer), so every layer may use them: internal/conf, the
// typed-config machinery behind config.Config.
var leafUtilities = map[string]bool{
	"internal/conf":     true,
	"internal/durable":  true, // fsync of a directory
	"internal/exepages": true, // give back the executable's read-only pages
	"internal/waitfor":  true, // a bounded wait on a WaitGroup
	"internal/ratelog":  true, // one log line per repeating failure per interval
	"internal/rusage":   true, // getrusage(2): CPU time and peak RSS
}

func sortedKeys(m map[string]bool) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// extraAllowed are the imports between packages of equal rank that the
// design allows.
var extraAllowed = map[[2]string]bool{
	{"pkg/wire", "pkg/meta"}: true,
}

type listedPackage struct {
	ImportPath   string
	Dir          string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string // every package the package links, transitively, tests aside
	TestGoFiles  []string
	XTestGoFiles []string
}

// TestImportsPointDown lists every package of the module with `go list` and
// fails on an import that runs against docs/design.md §3:
// cmd → broker → {meta, wire} → logstore → schema; nothing but main and
// internal/gendocs imports cmd (tests included); pkg/ imports of internal/
// only reach leaf utilities that import nothing of the module.
func TestImportsPointDown(t *testing.T) {
	pkgs := listPackages(t)
	if len(pkgs) < 6 {
		t.Fatalf("go list found %d packages of %s; expected the whole module", len(pkgs), module)
	}
	for _, p := range pkgs {
		from := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		for _, imp := range p.Imports {
			if msg := checkImport(from, imp, false); msg != "" {
				t.Error(msg)
			}
		}
		for _, imp := range append(p.TestImports, p.XTestImports...) {
			if msg := checkImport(from, imp, true); msg != "" {
				t.Error(msg)
			}
		}
	}
}

// TestImportRulesCatchUpwardArrows shows the checker refuses each kind of
// wrong arrow, so a green TestImportsPointDown means something.
func TestImportRulesCatchUpwardArrows(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		test     bool
		ok       bool
	}{
		{"pkg/broker", "pkg/wire", false, true},
		{"pkg/broker", "pkg/broker/supervise", false, true},
		{"pkg/broker/supervise", "pkg/logstore", false, true},
		{"pkg/broker/supervise", "pkg/broker", false, false},
		{"pkg/broker", "pkg/broker/config", false, true},
		{"pkg/broker/config", "pkg/broker", false, false},
		{"pkg/broker/config", "pkg/broker/supervise", false, false},
		{"pkg/broker/config", "internal/conf", false, true},
		{"pkg/broker", "pkg/broker/frame", false, true},
		{"pkg/broker/frame", "pkg/wire", false, true},
		{"pkg/broker/frame", "pkg/broker", false, false},
		{"pkg/broker", "pkg/broker/backlog", false, true},
		{"pkg/broker/backlog", "pkg/broker", false, false},
		{"pkg/broker/marks", "pkg/logstore", false, true},
		{"pkg/broker/marks", "pkg/broker/frame", false, false},
		{"pkg/broker/peerframe", "pkg/broker", false, false},
		{"pkg/wire", "pkg/meta", false, true},
		{"pkg/wire", "pkg/logstore", false, true},
		{"pkg/meta", "pkg/logstore", false, true},
		{"pkg/meta/lifecycle", "pkg/meta", false, true},
		{"pkg/meta", "pkg/meta/lifecycle", false, false},
		{"pkg/wire/txbox", "pkg/wire", false, true},
		{"pkg/wire", "pkg/wire/txbox", false, false},
		{"pkg/broker", "pkg/meta/lifecycle", false, true},
		{"cmd", "pkg/broker", false, true},
		{"internal/gendocs", "cmd", false, true},
		{"internal/loadgen", "pkg/broker", false, true},
		{"pkg/wire", "pkg/broker", true, true}, // a test may drive a real server
		{"", "cmd", false, true},               // main
		{"pkg/logstore", "pkg/meta", false, false},
		{"pkg/meta", "pkg/wire", false, false},
		{"pkg/schema", "pkg/logstore", false, false},
		{"pkg/wire", "pkg/broker", false, false},
		{"pkg/broker", "cmd", false, false},
		{"pkg/broker", "cmd", true, false},
		{"internal/loadgen", "cmd", false, false},
		{"pkg/broker", "internal/loadgen", false, false},
		{"pkg/broker", "internal/conf", false, true},
		{"internal/conf", "pkg/schema", false, false},
	} {
		msg := checkImport(tc.from, module+"/"+tc.to, tc.test)
		if (msg == "") != tc.ok {
			t.Errorf("%s → %s (test %v): allowed=%v, want %v (%s)", tc.from, tc.to, tc.test, msg == "", tc.ok, msg)
		}
	}
}

// checkImport returns why from (a path relative to the module, "" for main)
// may not import imp, or "" when it may. Test imports may reach up to drive
// a real server, but never into cmd.
func checkImport(from, imp string, test bool) string {
	if imp != module && !strings.HasPrefix(imp, module+"/") {
		return "" // the standard library and dependencies
	}
	to := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
	switch {
	case to == "cmd":
		if from == "" || from == "internal/gendocs" || (test && from == "testscript") {
			return ""
		}
		return from + " imports cmd; only main and internal/gendocs may (cmd stays thin and nothing depends on it)"
	case test:
		return ""
	case strings.HasPrefix(from, "pkg/") && strings.HasPrefix(to, "internal/") && !leafUtilities[to]:
		return from + " imports " + to + "; pkg/ packages never depend on internal/ tooling (only on the leaf utilities " + strings.Join(sortedKeys(leafUtilities), ", ") + ")"
	case leafUtilities[from] && to != from:
		return from + " imports " + to + "; a leaf utility imports nothing of the module, so every layer may use it"
	}
	fromRank, fromLayered := layer[from]
	toRank, toLayered := layer[to]
	if !fromLayered || !toLayered {
		return "" // internal/, testscript and main sit beside the layers
	}
	if toRank < fromRank || extraAllowed[[2]string{from, to}] {
		return ""
	}
	return from + " imports " + to + ", an arrow upward or sideways; allowed: cmd → broker → {meta, wire} → logstore → schema, and wire → meta (docs/design.md §3)"
}

func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
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

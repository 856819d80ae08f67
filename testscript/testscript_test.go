package testscript_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/streamcast/streamcast/cmd"
	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/wire"
	"github.com/streamcast/streamcast/pkg/wire/txbox"
)

var update = flag.Bool("update", false, "rewrite the scripts' expected output files (cmp targets) with what the commands print")

// TestMain makes this test binary double as the streamcast command: inside
// a script, `exec streamcast …` runs cmd.Execute in a child process and
// exits with its code, exactly as the real main does.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"streamcast": func() { os.Exit(cmd.Execute()) },
	})
}

func TestScripts(t *testing.T) {
	params := testscript.Params{
		Dir:                 ".",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       *update,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": exitCode,
			// For the tail and publish scripts, which run a real server.
			"waitaddr":   waitAddr,
			"genrows":    genRows,
			"waitrows":   waitRows,
			"appendfile": appendFile,
			"waitfile":   waitFile,
			"ws":         wsRaw,
			"gencerts":   genCerts,
			"httpget":    httpGet,
			"sqlexec":    sqlExec,
		},
	}
	for name, fn := range platformCmds() {
		params.Cmds[name] = fn
	}
	params.Setup = func(env *testscript.Env) error {
		if name := strings.TrimPrefix(filepath.Base(env.WorkDir), "script-"); testing.Short() && !shortScripts[name] {
			env.T().Skip("runs without -short; the -short run keeps the scripts whose commands run concurrently")
		}
		// The scripts check what the commands do and say, not their
		// memory: a wider collector headroom saves the CPU of the
		// collections in every process they start (serve's children keep
		// an operator's GOGC, so it reaches them too). The children's own
		// setting is tested in pkg/logstore (maintain_env_test.go).
		if os.Getenv("GOGC") == "" {
			env.Setenv("GOGC", "400")
		}
		return nil
	}
	testscript.Run(t, params)
}

// shortScripts are the scripts a -short run keeps: those where serve,
// tail and publish run side by side, whose goroutines the race run
// (go test -race -short, in .ci/run) is for. Under -race every command
// of a script is an instrumented process that takes seconds to start, so
// the whole set there took 320 s; every script still runs in the
// README's go test ./....
var shortScripts = map[string]bool{
	"serve":                true,
	"tail":                 true,
	"publish":              true,
	"publish_exactly_once": true,
	"tail_reconnect":       true,
	"reload":               true,
	"relay":                true,
	"replicate_serve":      true,
	"metrics":              true,
}

// exitCode runs a program and checks its exact exit status, keeping its
// stdout and stderr for the commands that follow:
//
//	exitcode 2 streamcast --nope
//	stderr 'unknown flag'
func exitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! exitcode (give the expected code instead)")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: exitcode N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: %q is not an exit code", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exitcode: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with %d, want %d", args[1], got, want)
	}
}

// waitAddr waits (up to 30 s) for a server's --addr-file and puts the
// address it holds in an environment variable:
//
//	exec streamcast serve --listen 127.0.0.1:0 --addr-file addr &srv&
//	waitaddr addr ADDR
//	exec streamcast tail ws://$ADDR/trades
func waitAddr(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitaddr FILE VAR")
	}
	path := ts.MkAbs(args[0])
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			ts.Setenv(args[1], strings.TrimSpace(string(b)))
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitaddr: %s did not appear within 30s; is the server running?", args[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFile waits (up to 30 s) until FILE exists and its contents match the
// regular expression REGEX:
//
//	waitfile tail.cursor '^5$'
func waitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitfile FILE REGEX")
	}
	re, err := regexp.Compile("(?m)" + args[1])
	ts.Check(err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(ts.MkAbs(args[0]))
		if err == nil && re.Match(b) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfile: %s does not match %q after 30s (it holds %q, err %v)", args[0], args[1], b, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// genCerts mints a CA and, signed by it, a server certificate for
// 127.0.0.1 and a client certificate with the common name CN, into DIR:
// ca.crt, server.crt, server.key, client.crt, client.key.
//
//	gencerts certs alice
func genCerts(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: gencerts DIR CN")
	}
	dir := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(dir, 0o755))
	ts.Check(testkit.WriteTLSFiles(dir, args[1]))
}

// genRows writes N rows of the demo schema, in its canonical form (so a
// tail --rows of them compares byte for byte), numbered from FIRST (0):
//
//	genrows 1000 rows.ndjson
func genRows(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: genrows N FILE [FIRST]")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("genrows: N %q: %v", args[0], err)
	}
	first := 0
	if len(args) == 3 {
		if first, err = strconv.Atoi(args[2]); err != nil {
			ts.Fatalf("genrows: FIRST %q: %v", args[2], err)
		}
	}
	var b []byte
	for i := first; i < first+n; i++ {
		b = fmt.Appendf(b, `{"event_ts":%d,"symbol":"BTC-USD","price":%d.5,"amount":0.015,"side":%d,"trade_id":null}`+"\n", 1790038800000000+i, 85000+i%1000, i%2)
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), b, 0o644))
}

// waitRows waits (up to 30 s) until the stream at URL holds at least N rows
// (counted from the earliest it serves to its frontier).
func waitRows(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitrows URL N")
	}
	want, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		ts.Fatalf("waitrows: N %q: %v", args[1], err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := wire.Subscribe(ctx, args[0], wire.SubscribeOptions{FromEarliest: true})
		cancel()
		have := int64(0)
		if err == nil {
			if r := s.Greeting().Replay; r != nil {
				have = r.End - r.Start
			}
			s.Close()
		}
		if have >= want {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitrows: %s holds %d rows after 30s, want %d (last error: %v)", args[0], have, want, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// httpGet makes one GET request and prints `status N`, then the body, on
// stdout (for /metrics, /stats and /health):
//
//	httpget http://$ADDR/metrics
//	stdout '^status 200$'
func httpGet(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: httpget URL")
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(args[0])
	ts.Check(err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	ts.Check(err)
	fmt.Fprintf(ts.Stdout(), "status %d\n%s", resp.StatusCode, body)
}

// appendFile appends the contents of SRC to DST (for publish --follow).
func appendFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: appendfile SRC DST")
	}
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	f, err := os.OpenFile(ts.MkAbs(args[1]), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	ts.Check(err)
	_, err = f.Write(b)
	ts.Check(err)
	ts.Check(f.Close())
}

// sqlExec runs SQL statements in one transaction on a database named the
// way the CLI names one (sqlite:///abs/path.db, sqlite://rel.db,
// postgres://…), as an application in another language would:
//
//	sqlexec sqlite://$WORK/app.db 'INSERT INTO t VALUES (1)' 'UPDATE …'
func sqlExec(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: sqlexec DSN STATEMENT...")
	}
	db, _, err := txbox.OpenDSN(args[0])
	ts.Check(err)
	defer db.Close()
	tx, err := db.Begin()
	ts.Check(err)
	defer tx.Rollback()
	for _, q := range args[1:] {
		if _, err := tx.Exec(q); err != nil {
			if neg {
				return
			}
			ts.Fatalf("sqlexec %s: %v", q, err)
		}
	}
	ts.Check(tx.Commit())
	if neg {
		ts.Fatalf("sqlexec succeeded")
	}
}

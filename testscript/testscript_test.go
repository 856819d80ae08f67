package testscript_test

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/streamcast/streamcast/cmd"
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
	testscript.Run(t, testscript.Params{
		Dir:                 ".",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       *update,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": exitCode,
		},
	})
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

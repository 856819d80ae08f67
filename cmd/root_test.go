package cmd

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Chdir(t.TempDir()) // no ./streamcast.yaml
	t.Setenv(configEnv, "")
	var out, errOut bytes.Buffer
	code = Run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRunExitCodes(t *testing.T) {
	tests := []struct {
		args       []string
		code       int
		stderrHead string
	}{
		{[]string{"version"}, ExitOK, ""},
		{[]string{"--nope"}, ExitUsage, "streamcast: unknown flag --nope; see 'streamcast --help'\n"},
		{[]string{"nope"}, ExitUsage, `streamcast: unknown command "nope"; see 'streamcast --help'` + "\n"},
		{[]string{"version", "x"}, ExitUsage, `streamcast version: takes no arguments, got "x"; see 'streamcast version --help'` + "\n"},
		{[]string{"version", "--jsn"}, ExitUsage, `streamcast version: unknown flag --jsn (did you mean --json?); see 'streamcast version --help'` + "\n"},
		{[]string{"--config", "missing.yaml", "version"}, ExitFailure, "streamcast: read config: open missing.yaml: no such file or directory\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := run(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			if !strings.HasPrefix(stderr, tt.stderrHead) {
				t.Errorf("stderr begins %q, want %q", stderr, tt.stderrHead)
			}
			if tt.code != ExitOK && strings.Count(stderr, "\n") != 1 {
				t.Errorf("error is not one line:\n%s", stderr)
			}
		})
	}
}

func TestStrictArgsMakesDeclaredArgsErrorsUsageErrors(t *testing.T) {
	root := &cobra.Command{Use: "x", SilenceErrors: true, SilenceUsage: true}
	root.AddCommand(&cobra.Command{Use: "one NAME", Args: cobra.ExactArgs(1), RunE: func(*cobra.Command, []string) error { return nil }})
	strictArgs(root)
	for _, args := range [][]string{{"one"}, {"one", "a", "b"}, {"two"}} {
		root.SetArgs(args)
		_, err := root.ExecuteC()
		if ue := (usageError{}); !errors.As(err, &ue) {
			t.Errorf("%v: got %v, want a usage error", args, err)
		}
	}
	root.SetArgs([]string{"one", "a"})
	if _, err := root.ExecuteC(); err != nil {
		t.Errorf("one a: %v", err)
	}
}

func TestEachRootCommandIsIndependent(t *testing.T) {
	var out1, out2 bytes.Buffer
	r1 := NewRootCommand(strings.NewReader(""), &out1, &out1)
	r2 := NewRootCommand(strings.NewReader(""), &out2, &out2)
	if err := r1.PersistentFlags().Set("log-level", "debug"); err != nil {
		t.Fatal(err)
	}
	if got := r2.PersistentFlags().Lookup("log-level").Value.String(); got != "info" {
		t.Errorf("second tree's --log-level is %q after setting the first's; trees share state", got)
	}
}

func TestNearestFlagIsOneSlipAway(t *testing.T) {
	names := []string{"count", "cursor", "offset", "reconnect", "reset-position", "rows", "until-caught-up", "where"}
	for typed, want := range map[string]string{
		"ofset":     "offset", // a letter left out
		"offest":    "offset", // two swapped
		"reconect":  "reconnect",
		"Offset":    "offset",
		"until":     "until-caught-up", // the only flag it begins
		"re":        "",                // too short to guess from
		"cou":       "count",
		"verbose":   "",
		"rows-only": "",
	} {
		if got := nearest(typed, names); got != want {
			t.Errorf("nearest(%q) = %q, want %q", typed, got, want)
		}
	}
}

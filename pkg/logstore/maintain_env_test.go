package logstore

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/internal/testkit"
)

// gcPercentAtInit is the GOGC this test binary's package initialisers ran
// with, read during them: what a child of serve's initialisers see.
var gcPercentAtInit = func() int {
	n := debug.SetGCPercent(-1)
	debug.SetGCPercent(n)
	return n
}()

// childProbeEnv makes this test binary, started as a child, print what
// its runtime runs with instead of running tests.
const childProbeEnv = "STREAMCAST_TEST_CHILD_RUNTIME"

func TestMain(m *testing.M) {
	if os.Getenv(childProbeEnv) != "" {
		AfterInit()
		after := debug.SetGCPercent(-1)
		debug.SetGCPercent(after)
		fmt.Printf("init=%d after=%d memprofilerate=%d\n", gcPercentAtInit, after, runtime.MemProfileRate)
		os.Exit(0)
	}
	testkit.RelaxGC()
	os.Exit(m.Run())
}

// probeChild starts this test binary with env as a child of serve would
// run and returns what its runtime reported.
func probeChild(t *testing.T, env []string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(env, childProbeEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child probe: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// without returns environ less the variables named.
func without(environ []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, k)
	})
}

// TestChildRuntimeCollectsOftenDuringInitThenAsUsual: a child started
// with ChildEnv runs its package initialisers with GOGC 25 and collects at
// the default 100 after AfterInit, with the memory profiler off; a real
// child process, since only the environment reaches its initialisers.
func TestChildRuntimeCollectsOftenDuringInitThenAsUsual(t *testing.T) {
	base := without(os.Environ(), "GOGC", "GODEBUG", HeapProfileEnv, afterInitEnv)
	if got, want := probeChild(t, ChildEnv(base)), "init=25 after=100 memprofilerate=0"; got != want {
		t.Fatalf("a child of serve runs with %q, want %q", got, want)
	}
}

// TestChildEnvKeepsTheOperatorsSettings: a GOGC, a memprofilerate or a
// heap profile directory in serve's environment is what the child runs
// with; ChildEnv adds nothing over them, and keeps every variable.
func TestChildEnvKeepsTheOperatorsSettings(t *testing.T) {
	base := without(os.Environ(), "GOGC", "GODEBUG", HeapProfileEnv, afterInitEnv)
	defaultRate := runtime.MemProfileRate
	if gcPercentAtInit != 100 {
		t.Skipf("this test binary runs with GOGC %d; the cases below assume the default", gcPercentAtInit)
	}
	for _, c := range []struct {
		name string
		add  []string
		want string
	}{
		{"GOGC", []string{"GOGC=200"}, fmt.Sprintf("init=200 after=200 memprofilerate=%d", 0)},
		{"memprofilerate", []string{"GODEBUG=madvdontneed=1,memprofilerate=1024"}, "init=25 after=100 memprofilerate=1024"},
		{"heap profiles", []string{HeapProfileEnv + "=" + t.TempDir()}, fmt.Sprintf("init=25 after=100 memprofilerate=%d", defaultRate)},
	} {
		t.Run(c.name, func(t *testing.T) {
			environ := append(slices.Clone(base), c.add...)
			env := ChildEnv(environ)
			for _, kv := range environ {
				if !slices.Contains(env, kv) {
					t.Fatalf("ChildEnv dropped %q", kv)
				}
			}
			if got := probeChild(t, env); got != c.want {
				t.Fatalf("with %v the child runs with %q, want %q", c.add, got, c.want)
			}
		})
	}
}

// TestChildEnvKeepsOtherDebugSettings: GODEBUG's other settings stay when
// the memory profiler is turned off.
func TestChildEnvKeepsOtherDebugSettings(t *testing.T) {
	base := without(os.Environ(), "GOGC", "GODEBUG", HeapProfileEnv, afterInitEnv)
	env := ChildEnv(append(base, "GODEBUG=madvdontneed=1"))
	// exec keeps the last of duplicate keys.
	var last string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			last = v
		}
	}
	if last != "madvdontneed=1,memprofilerate=0" {
		t.Fatalf("the child's GODEBUG is %q", last)
	}
}

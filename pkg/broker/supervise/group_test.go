package supervise

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
)

func TestOverridesReachTheChildrensArgs(t *testing.T) {
	sup := New("/bin/streamcast", "", []Schedule{{logstore.RoleClean, time.Minute}}, []string{"/data/t/t"}, 30*time.Second, time.Second, log.New(io.Discard))
	sup.Overrides = logstore.Override{StagingRetention: time.Hour, StagingMaxBytes: 4096, DeleteGrace: 2 * time.Minute}
	args := sup.children[0].args()
	// The root command's flags come first; the role's are logstore's.
	i := slices.Index(args, "--role")
	if args[0] != logstore.MaintainCommand || i < 0 {
		t.Fatalf("maintain args %q", args)
	}
	got, err := logstore.ParseMaintainArgs(args[i:])
	if err != nil {
		t.Fatalf("maintain args %q: %v", args, err)
	}
	want := logstore.MaintainArgs{
		Role: logstore.RoleClean, Every: time.Minute, FlushEvery: 30 * time.Second, Logs: []string{"/data/t/t"}, ReadyFD: readyFD, AddFD: addFD,
		Override: logstore.Override{StagingRetention: time.Hour, StagingMaxBytes: 4096, DeleteGrace: 2 * time.Minute},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("maintain args %q read back as %+v, want %+v", args, got, want)
	}
}

func TestParseLogLineKeepsLevelMessageAndKeys(t *testing.T) {
	line := `{"time":"2026-01-01T00:00:00Z","level":"error","role":"seal","msg":"pass failed; retrying next pass","log":"/d/t/t","rows":3,"err":"disk full"}`
	level, msg, kv, ok := parseLogLine([]byte(line), "seal")
	if !ok || level != log.ErrorLevel || msg != "pass failed; retrying next pass" {
		t.Fatalf("got %v %q %v %v", level, msg, kv, ok)
	}
	if got := fmt.Sprint(kv); got != "[log /d/t/t rows 3 err disk full]" {
		t.Errorf("keys %s", got)
	}
	if _, _, _, ok := parseLogLine([]byte("streamcast: read config: no such file"), "seal"); ok {
		t.Error("a plain line parsed as JSON")
	}
}

func TestStopSealsAndPublishesItselfWhenTheChildrenDoNot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	// Children that report ready and then ignore every request.
	fake := filepath.Join(t.TempDir(), "streamcast")
	script := "#!/bin/sh\ntrap '' USR1 TERM\necho ready >&3\nexec sleep 60\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "s", "s")
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := logstore.Create(dir, schema.Any(), logstore.Config{Stream: "s", Log: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	for i := range 5 {
		if _, err := l.Append(ctx, [][]byte{[]byte(fmt.Sprintf(`{"i":%d}`, i))}, time.Now().UnixMicro(), nil); err != nil {
			t.Fatal(err)
		}
	}
	logs := &testkit.SyncBuffer{}
	roles := []Schedule{{logstore.RoleSeal, time.Hour}, {logstore.RolePublish, time.Hour}, {logstore.RoleClean, time.Hour}}
	sup := New(fake, "", roles, []string{dir}, time.Hour, 5*time.Second, log.New(logs))
	sup.waits = StopWaits{SealFlush: 200 * time.Millisecond, ChildStop: 200 * time.Millisecond, FinalSeal: 10 * time.Second, Publish: 2 * time.Second}
	if err := sup.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pids := sup.Stats()
	sup.Stop([]*logstore.Log{l})

	for _, k := range pids {
		if !gone(*k.PID) {
			t.Errorf("child %s (pid %d) survived the stop", k.Role, *k.PID)
		}
	}
	if _, err := l.Clean(ctx); err != nil { // evicts the buffered rows files hold
		t.Fatal(err)
	}
	st, err := l.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.BufferedRows != 0 || st.PublishedThrough != 5 || st.PublishLagRows != 0 {
		t.Errorf("after the stop: %+v, want every row sealed and published by serve itself", st)
	}
	out := logs.String()
	for _, want := range []string{"did not report a flush", "killing it", "sealed at stop", "did not publish every row", "published at stop"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not say %q:\n%s", want, out)
		}
	}
}

// gone reports whether pid no longer runs: no such process, or a zombie
// waiting for a reaper that may never come (PID 1 in a container).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) != nil
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) == 0 || f[0] == "Z" || f[0] == "X"
}

// TestLastErrorSaysWhenItHappened: /stats keeps a child's last error after
// it is healthy again, so it carries the time it happened: an error a
// child logged, then how it exited when killed, each with a time no
// earlier than the event.
func TestLastErrorSaysWhenItHappened(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	fake := filepath.Join(t.TempDir(), "streamcast")
	// Only its first run logs the error, so the exit stays the last one.
	script := "#!/bin/sh\nif [ ! -e \"$0.ran\" ]; then : >\"$0.ran\"; echo '{\"level\":\"error\",\"msg\":\"pass failed\",\"err\":\"database or disk is full\"}'; fi\necho ready >&3\nexec sleep 60\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Millisecond)
	sup := New(fake, "", []Schedule{{logstore.RoleClean, time.Hour}}, []string{t.TempDir()}, time.Hour, 5*time.Second, log.New(io.Discard))
	sup.waits = StopWaits{SealFlush: 100 * time.Millisecond, ChildStop: 200 * time.Millisecond, FinalSeal: time.Second, Publish: time.Second}
	if err := sup.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer sup.Stop(nil)
	stat := func() ChildStats { return sup.Stats()[0] }
	waitUntil := func(what string, cond func(ChildStats) bool) ChildStats {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			if c := stat(); cond(c) {
				return c
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /stats child is %+v", what, stat())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	first := waitUntil("the logged error", func(c ChildStats) bool {
		return c.LastError != nil && strings.Contains(*c.LastError, "disk is full")
	})
	if first.LastErrorAt == nil || first.LastErrorAt.Before(before) || first.LastErrorAt.After(time.Now()) {
		t.Fatalf("last_error_at %v for an error logged after %v", first.LastErrorAt, before)
	}
	killed := time.Now().Add(-time.Millisecond)
	if err := syscall.Kill(*first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	second := waitUntil("the exit", func(c ChildStats) bool {
		return c.LastError != nil && strings.Contains(*c.LastError, "signal: killed")
	})
	if second.LastErrorAt == nil || second.LastErrorAt.Before(killed) {
		t.Fatalf("last_error_at %v for an exit after %v", second.LastErrorAt, killed)
	}
	if b, err := json.Marshal(second); err != nil || !strings.Contains(string(b), `"last_error_at":"`) {
		t.Fatalf("/stats child JSON %s (%v) lacks last_error_at", b, err)
	}
}

// TestOnlyTheRetainChildRunsOverRetiredLogs: a retired stream's log is
// fenced and published whole, so only retain, whose window still applies,
// gets it; a role left with no log at all gets no child.
func TestOnlyTheRetainChildRunsOverRetiredLogs(t *testing.T) {
	roles := []Schedule{{logstore.RoleSeal, time.Second}, {logstore.RoleRetain, time.Hour}}
	logsOf := func(g *Group) map[logstore.Role][]string {
		got := map[logstore.Role][]string{}
		for _, c := range g.children {
			args := c.args()
			for i, a := range args {
				if a == "--"+logstore.FlagLog && i+1 < len(args) {
					got[c.role] = append(got[c.role], args[i+1])
				}
			}
		}
		return got
	}
	g := New("streamcast", "", roles, []string{"/r/live/live"}, time.Minute, time.Second, log.New(io.Discard))
	g.RetiredLogs = []string{"/r/old/old"}
	got := logsOf(g)
	if !slices.Equal(got[logstore.RoleSeal], []string{"/r/live/live"}) || !slices.Equal(got[logstore.RoleRetain], []string{"/r/live/live", "/r/old/old"}) {
		t.Fatalf("the children's logs: %q; want seal over the live log, retain over both", got)
	}
	for _, c := range g.children {
		if n := len(c.logs()); n == 0 {
			t.Fatalf("role %s has no logs", c.role)
		}
	}
	g = New("streamcast", "", roles, nil, time.Minute, time.Second, log.New(io.Discard))
	g.RetiredLogs = []string{"/r/old/old"}
	var empty []logstore.Role
	for _, c := range g.children {
		if len(c.logs()) == 0 {
			empty = append(empty, c.role)
		}
	}
	if !slices.Equal(empty, []logstore.Role{logstore.RoleSeal}) {
		t.Fatalf("roles with no log when every stream is retired: %v; want only seal (Start drops it)", empty)
	}
}

// TestEnsureHandsAStartedStreamsLogsToTheRunningChildren: logs appended
// to the set reach the children running, none restarted, when each
// confirms them; a child killed by the request needs no answer, and the
// one that replaces it finds the log on its command line; a refusal, a
// child that never answers and any change other than an append replace
// the Group with one over every log.
func TestEnsureHandsAStartedStreamsLogsToTheRunningChildren(t *testing.T) {
	// A stand-in for `streamcast maintain`: it records each run's pid and
	// command line, reports ready, and answers each request on its add
	// pipe as $0.mode says at that moment.
	fake := filepath.Join(t.TempDir(), "streamcast")
	script := `#!/bin/sh
echo "$$ $*" >>"$0.runs"
echo ready >&3
while IFS= read -r line <&4; do
	seq=${line#*\"seq\":}
	seq=${seq%%,*}
	case $(cat "$0.mode") in
	added) echo "added $seq" >&3 ;;
	refused) echo "refused $seq no log at that path" >&3 ;;
	die) kill -9 $$ ;;
	esac
done
exec sleep 60
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	mode := func(m string) {
		t.Helper()
		if err := os.WriteFile(fake+".mode", []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runs := func() []string {
		b, _ := os.ReadFile(fake + ".runs")
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	var r Runner
	t.Cleanup(func() {
		if g := r.Replace(nil); g != nil {
			g.Halt()
		}
	})
	sp := Spec{
		Executable:   fake,
		Roles:        []Schedule{{logstore.RoleSeal, time.Hour}, {logstore.RoleRetain, time.Hour}},
		FlushEvery:   time.Hour,
		ReadyTimeout: 5 * time.Second,
		Logger:       log.New(io.Discard),
	}
	ensure := func(live ...string) *Group {
		t.Helper()
		if err := r.Ensure(context.Background(), Logs{Live: live}, sp); err != nil {
			t.Fatalf("Ensure over %q: %v", live, err)
		}
		return r.Current()
	}
	pids := func(g *Group) map[string]int {
		out := map[string]int{}
		for _, c := range g.Stats() {
			if c.PID != nil && c.Ready {
				out[c.Role] = *c.PID
			}
		}
		return out
	}

	mode("added")
	g := ensure("/r/a/a")
	before, n := pids(g), len(runs())
	if len(before) != 2 || n != 2 {
		t.Fatalf("children %v, runs %q; want two, ready", before, runs())
	}
	if ensure("/r/a/a", "/r/b/b") != g || !reflect.DeepEqual(pids(g), before) || len(runs()) != n {
		t.Fatalf("appending a log restarted the children: pids %v, were %v; runs %q", pids(g), before, runs())
	}

	// Killed by the request: no answer is needed, and the replacement has
	// the log on its command line.
	mode("die")
	if ensure("/r/a/a", "/r/b/b", "/r/c/c") != g {
		t.Fatal("a child that died taking a log made Ensure replace the Group; its restart has the log")
	}
	deadline := time.Now().Add(10 * time.Second)
	for now := pids(g); len(now) < 2 || now["seal"] == before["seal"] || now["retain"] == before["retain"]; now = pids(g) {
		if time.Now().After(deadline) {
			t.Fatalf("the children killed by the request were not restarted: %v, were %v", now, before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, run := range runs()[n:] {
		if !strings.Contains(run, "--log /r/c/c") {
			t.Errorf("a restarted child's command line lacks the log added as it died: %s", run)
		}
	}

	// Refused: the Group is replaced, over every log.
	mode("refused")
	n = len(runs())
	if ensure("/r/a/a", "/r/b/b", "/r/c/c", "/r/d/d") == g {
		t.Fatal("a refused log left the Group running")
	}
	g = r.Current()
	for _, run := range runs()[n:] {
		if !strings.Contains(run, "--log /r/a/a --log /r/b/b --log /r/c/c --log /r/d/d") {
			t.Errorf("a child of the new Group does not run over every log: %s", run)
		}
	}

	// Silent: given up after the wait, and the Group replaced.
	mode("silent")
	g.addWait = 200 * time.Millisecond
	t0 := time.Now()
	if ensure("/r/a/a", "/r/b/b", "/r/c/c", "/r/d/d", "/r/e/e") == g {
		t.Fatal("a child that never answered left the Group running")
	}
	if took := time.Since(t0); took > 3*time.Second {
		t.Errorf("Ensure took %v past a child that never answered", took)
	}

	// Anything but an append (a stream stopped) restarts.
	mode("added")
	g = r.Current()
	if ensure("/r/a/a", "/r/c/c", "/r/d/d", "/r/e/e") == g {
		t.Fatal("removing a log left the Group running over it")
	}
}

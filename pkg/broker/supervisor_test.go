//go:build linux

package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/internal/testkit"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// The supervision tests run real processes, and read /proc and the
// parent-death signal's effect: Linux only.

// streamcastExe returns the streamcast command built from this module
// (testkit.Streamcast, once per test binary; TestMain removes it), for
// every process the test starts: serve, and the maintenance children serve
// forks. broker's tests must not import cmd (nothing may), nor
// internal/testkit/brokertest (it imports broker).
func streamcastExe(t testing.TB) string {
	t.Helper()
	return testkit.Streamcast(t)
}

// maintainOf runs the roles given, at their intervals, and no other.
func maintainOf(every map[logstore.Role]time.Duration, flush time.Duration) config.Maintain {
	return config.Maintain{
		Enabled:             true,
		FlushEvery:          flush,
		SealEvery:           every[logstore.RoleSeal],
		CompactEvery:        every[logstore.RoleCompact],
		PublishEvery:        every[logstore.RolePublish],
		CleanEvery:          every[logstore.RoleClean],
		CleanPublishedEvery: every[logstore.RoleCleanPublished],
	}
}

// getStats reads /stats over HTTP.
func getStats(t *testing.T, addr string) Stats {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
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

func TestSupervisorRestartsAKilledChildAndReportsIt(t *testing.T) {
	exe := streamcastExe(t)
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:2] // trades (durable) and live
	cfg.Maintain = maintainOf(map[logstore.Role]time.Duration{logstore.RoleSeal: 100 * time.Millisecond, logstore.RoleClean: 200 * time.Millisecond}, time.Second)
	logs := &testkit.SyncBuffer{}
	srv := startServer(t, cfg, Options{Executable: exe, Logger: log.New(logs)})

	kids := getStats(t, srv.Addr().String()).Children
	if len(kids) != 2 || kids[0].Role != "seal" || kids[1].Role != "clean" {
		t.Fatalf("children %+v, want seal and clean", kids)
	}
	for _, k := range kids {
		if k.PID == nil || !k.Ready || k.Restarts != 0 || k.LastError != nil {
			t.Fatalf("child %+v: want running, ready, never restarted", k)
		}
		if pgid, err := syscall.Getpgid(*k.PID); err != nil || pgid != *k.PID {
			t.Fatalf("child %s (pid %d) is in process group %d (%v), want its own: a terminal's Ctrl-C must reach serve alone", k.Role, *k.PID, pgid, err)
		}
	}

	old := *kids[0].PID
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the seal child to be restarted and ready", 15*time.Second, func() bool {
		c := srv.Stats().Children[0]
		return c.Restarts == 1 && c.PID != nil && *c.PID != old && c.Ready
	})
	c := srv.Stats().Children[0]
	if c.LastError == nil || !strings.Contains(*c.LastError, "signal: killed") {
		t.Errorf("last_error %v, want how the child exited", c.LastError)
	}
	if out := logs.String(); !strings.Contains(out, "restarting it") || !strings.Contains(out, "signal: killed") {
		t.Errorf("the restart is not logged with the exit status:\n%s", out)
	}

	// The restarted seal (flushing each second) and clean move every row
	// out of the buffer into a file, and /stats tells.
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(batch(0, 10)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	waitFor(t, "the rows to be sealed and evicted", 20*time.Second, func() bool {
		s := streamStats(srv, "trades")
		return s.BufferedRows != nil && *s.BufferedRows == 0 && s.LocalFiles != nil && *s.LocalFiles >= 1
	})
	st := getStats(t, srv.Addr().String())
	var trades, live StreamStats
	for _, s := range st.Streams {
		switch s.Name {
		case "trades":
			trades = s
		case "live":
			live = s
		}
	}
	if trades.PublishedThrough == nil || *trades.PublishedThrough != 0 || trades.PublishLagRows == nil || *trades.PublishLagRows != 10 || trades.PublishLagS == nil {
		t.Errorf("trades tiers %+v: nothing publishes, so published_through 0 and a lag of 10 rows", trades)
	}
	if live.BufferedRows != nil || live.LocalFiles != nil || live.PublishedThrough != nil || live.PublishLagRows != nil {
		t.Errorf("a live-only stream has no tiers: %+v", live)
	}
}

func TestStartFailsNamingAChildThatCannotBecomeReady(t *testing.T) {
	exe := streamcastExe(t)
	roles := map[logstore.Role]time.Duration{logstore.RoleSeal: 100 * time.Millisecond, logstore.RoleClean: time.Second}
	pids := regexp.MustCompile(`pid (\d+)`)

	t.Run("it exits at once", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "missing.yaml")
		t.Setenv("STREAMCAST_CONFIG", missing) // the children read it; this server does not
		cfg := testConfig(t)
		cfg.Maintain = maintainOf(roles, 0)
		srv, err := New(cfg, Options{Executable: exe})
		if err != nil {
			t.Fatal(err)
		}
		err = srv.Run(t.Context())
		if err == nil {
			t.Fatal("Run started with a child that exited")
		}
		for _, want := range []string{"role seal", "exited before it was ready", "exit status 1", missing} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		for _, m := range pids.FindAllStringSubmatch(err.Error(), -1) {
			if pid, _ := strconv.Atoi(m[1]); !gone(pid) {
				t.Errorf("child %d still runs after start-up failed", pid)
			}
		}
	})

	t.Run("it never reports ready", func(t *testing.T) {
		fake := filepath.Join(t.TempDir(), "streamcast")
		script := "#!/bin/sh\necho 'opening the logs takes forever' >&2\nexec sleep 60\n"
		if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t)
		cfg.Maintain = maintainOf(roles, 0)
		srv, err := New(cfg, Options{Executable: fake, ChildReadyTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- srv.Run(t.Context()) }()

		// While the children start, streams are refused, /health says
		// starting and /stats shows who is not ready.
		waitFor(t, "the listener", 5*time.Second, func() bool { return srv.Addr() != nil })
		waitFor(t, "the children in /stats", 5*time.Second, func() bool { return len(srv.Stats().Children) == 2 })
		resp, err := http.Get("http://" + srv.Addr().String() + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("/health answered %d while children start, want 503", resp.StatusCode)
		}
		for _, k := range getStats(t, srv.Addr().String()).Children {
			if k.Ready || k.PID == nil {
				t.Errorf("child %+v: want running and not ready", k)
			}
		}

		err = <-errc
		if err == nil {
			t.Fatal("Run started with children that never became ready")
		}
		for _, want := range []string{"not ready after 2s", "role seal (pid ", "role clean (pid ", "opening the logs takes forever"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		ms := pids.FindAllStringSubmatch(err.Error(), -1)
		if len(ms) != 2 {
			t.Fatalf("error %q names %d pids, want 2", err, len(ms))
		}
		for _, m := range ms {
			if pid, _ := strconv.Atoi(m[1]); !gone(pid) {
				t.Errorf("child %d still runs after start-up failed", pid)
			}
		}
	})
}

func TestKilledServeLeavesNoChild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux has a parent-death signal")
	}
	exe := streamcastExe(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "streamcast.yaml")
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
root: %s
streams:
  - name: trades
maintain: {seal_every: 100ms, compact_every: 1s, publish_every: 1s, clean_every: 1s, clean_published_every: 1s, flush_every: 1s}
`, filepath.Join(dir, "data"))
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	serve, done, _, addr := startServeProcess(t, exe, config, filepath.Join(dir, "addr"))
	kids := getStats(t, addr).Children
	if len(kids) != len(logstore.Roles()) {
		t.Fatalf("serve runs %d children, want one per role: %+v", len(kids), kids)
	}
	for _, k := range kids {
		if k.PID == nil || !k.Ready {
			t.Fatalf("child %+v is not running and ready", k)
		}
		if pgid, _ := syscall.Getpgid(*k.PID); pgid == serve.Process.Pid {
			t.Fatalf("child %s shares serve's process group", k.Role)
		}
	}

	if err := serve.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	deadline := time.Now().Add(time.Second)
	for _, k := range kids {
		for !gone(*k.PID) {
			if time.Now().After(deadline) {
				t.Fatalf("child %s (pid %d) outlived serve's SIGKILL by a second", k.Role, *k.PID)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestGracefulStopLeavesEveryAckedRowSealedAndPublished(t *testing.T) {
	exe := streamcastExe(t)
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1]
	// Passes once an hour: only the stop's flush can seal and publish.
	hour := time.Hour
	cfg.Maintain = maintainOf(map[logstore.Role]time.Duration{
		logstore.RoleSeal: hour, logstore.RoleCompact: hour, logstore.RolePublish: hour, logstore.RoleClean: hour, logstore.RoleCleanPublished: hour,
	}, hour)
	logs := &testkit.SyncBuffer{}
	srv := startServer(t, cfg, Options{Executable: exe, Logger: log.New(logs)})

	p := dialPublisher(t, srv, "trades")
	const frames, per = 20, 7
	for i := range frames {
		if r := p.roundTrip(batch(i*per, per)); r.Error != "" {
			t.Fatalf("publish: %+v", r)
		}
	}
	const acked = frames * per
	if s := streamStats(srv, "trades"); s.LocalFiles == nil || *s.LocalFiles != 0 || *s.BufferedRows != acked {
		t.Fatalf("before the stop: %+v, want every row buffered and no file", s)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	l, err := logstore.Open(logDirOf(t, cfg, "trades"), logstore.Maintainer)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	if _, err := l.Clean(ctx); err != nil { // only rows a file holds leave the buffer
		t.Fatal(err)
	}
	st, err := l.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.End != acked+1 || st.BufferedRows != 0 || st.LocalFiles == 0 {
		t.Errorf("after the stop: %+v, want all %d rows in files", st, acked)
	}
	if st.PublishedThrough != acked || st.PublishLagRows != 0 {
		t.Errorf("after the stop: %+v, want the table to hold offsets 1..%d", st, acked)
	}
	out := logs.String()
	for _, bad := range []string{"did not report a flush", "final seal failed", "not published yet", "killing it"} {
		if strings.Contains(out, bad) {
			t.Errorf("the stop did not go as designed (%q):\n%s", bad, out)
		}
	}
}

// startServeProcess runs `exe serve --config config` as a real process,
// waits (up to 60 s) for the address it writes to addrFile, and kills it when
// the test ends. done is closed once the process has exited.
func startServeProcess(t *testing.T, exe, config, addrFile string) (serve *exec.Cmd, done <-chan struct{}, stderr *testkit.SyncBuffer, addr string) {
	t.Helper()
	serve = exec.Command(exe, "serve", "--config", config, "--addr-file", addrFile)
	stderr = &testkit.SyncBuffer{}
	serve.Stderr = stderr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = serve.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = serve.Process.Kill()
		<-exited
	})
	waitFor(t, "serve to be ready", 60*time.Second, func() bool {
		select {
		case <-exited:
			t.Fatalf("serve exited: %s", stderr)
		default:
		}
		b, err := os.ReadFile(addrFile)
		addr = strings.TrimSpace(string(b))
		return err == nil && addr != ""
	})
	return serve, exited, stderr, addr
}

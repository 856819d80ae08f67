package cmd

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
)

func TestMaintainRefusesMissingFlags(t *testing.T) {
	for _, args := range [][]string{
		{"maintain", "--every", "1s", "--log", "x"},
		{"maintain", "--role", "seal", "--every", "1s"},
		{"maintain", "--role", "frobnicate", "--log", "x"},
		{"maintain", "--role", "seal", "--every", "0s", "--log", "x"},
		{"maintain", "--role", "clean", "--staging-retention", "-1s", "--log", "x"},
		{"maintain", "--role", "clean", "--ready-fd", "1", "--log", "x"},
		{"maintain", "--role", "clean", "--ready-fd", "987", "--log", "x"},
	} {
		code, _, stderr := run(t, args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d; stderr:\n%s", args, code, ExitUsage, stderr)
		}
	}
}

// TestMaintainRunsEveryRoleUntilCancelled runs each role in turn over one
// log: afterwards its rows are in the published table and nowhere else, and
// still read back through the log.
func TestMaintainRunsEveryRoleUntilCancelled(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s", "log")
	l, err := logstore.Create(dir, schema.Any(), logstore.Config{Stream: "s", Log: "log", TargetFileBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	if _, err := l.Append(ctx, [][]byte{[]byte(`{"a":1}`), []byte(`{"a":2}`)}, 1, nil); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	t.Setenv(configEnv, "")
	for _, role := range []string{"seal", "compact", "publish", "clean", "clean", "clean-published"} {
		rctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
		var out, errOut bytes.Buffer
		code := Run(rctx, []string{"maintain", "--role", role, "--every", "50ms", "--flush-every", "100ms",
			"--staging-retention", "1ns", "--local-delete-grace", "1ns", "--log", dir}, strings.NewReader(""), &out, &errOut)
		cancel()
		if code != ExitOK {
			t.Fatalf("maintain --role %s: exit %d; stderr:\n%s", role, code, errOut.String())
		}
	}
	var rows []string
	err = l.Scan(ctx, 1, 3, nil, func(off, ts int64, row []byte) error {
		rows = append(rows, string(row))
		return nil
	})
	if err != nil || strings.Join(rows, " ") != `{"a":1} {"a":2}` {
		t.Fatalf("after maintain: %v, %v", rows, err)
	}
	st, err := l.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.PublishedThrough != 2 || st.BufferedRows != 0 || st.LocalFiles != 0 {
		t.Fatalf("after every role: %+v", st)
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, logstore.FilesDir, "*.parquet")); len(entries) != 0 {
		t.Fatalf("maintain --role clean left %v in files/", entries)
	}
	loc, _ := l.PublishedLocation()
	if entries, _ := filepath.Glob(filepath.Join(loc, "data", "*.parquet")); len(entries) != 1 {
		t.Fatalf("the published table holds %v", entries)
	}
}

// TestMaintainReportsReadyAndFlushedOnTheReadyDescriptor: "ready", then
// "flushed" after a SIGUSR1; and, with STREAMCAST_HEAP_PROFILE_DIR set, a
// SIGUSR2 writes a heap profile there (unset, SIGUSR2 would end the
// process, this test's).
func TestMaintainReportsReadyAndFlushedOnTheReadyDescriptor(t *testing.T) {
	profiles := t.TempDir()
	t.Setenv(logstore.HeapProfileEnv, profiles)
	dir := filepath.Join(t.TempDir(), "s", "log")
	l, err := logstore.Create(dir, schema.Any(), logstore.Config{Stream: "s", Log: "log"})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// maintain closes the descriptor it is given when it ends: give it a
	// copy of its own.
	fd, err := unix.Dup(int(w.Fd()))
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	t.Setenv(configEnv, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var errOut bytes.Buffer
	go func() {
		done <- Run(ctx, []string{"maintain", "--role", "seal", "--every", "1h", "--flush-every", "0",
			"--ready-fd", strconv.Itoa(fd), "--log", dir}, strings.NewReader(""), &bytes.Buffer{}, &errOut)
	}()
	lines := bufio.NewScanner(r)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("first line on the ready descriptor: %q", lines.Text())
	}
	// SIGUSR1 is the flush request; this process gets it.
	if err := syscallKill(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() || lines.Text() != "flushed" {
		t.Fatalf("after SIGUSR1: %q", lines.Text())
	}
	if err := unix.Kill(os.Getpid(), unix.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	profile := filepath.Join(profiles, fmt.Sprintf("heap-seal-%d.pprof", os.Getpid()))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		// WriteHeapProfile writes the whole profile at once, after the
		// collection: a non-empty file is a written one, or close to it.
		if fi, err := os.Stat(profile); err == nil && fi.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no heap profile at %s 20s after SIGUSR2:\n%s", profile, errOut.String())
		}
	}
	// The memory statistics, written before the profile: where a child's
	// memory is besides its live heap.
	text, err := os.ReadFile(strings.TrimSuffix(profile, ".pprof") + ".txt")
	if err != nil {
		t.Fatalf("the memory statistics beside the heap profile: %v", err)
	}
	for _, want := range []string{"\nHeapInuse = ", "\nHeapReleased = ", "\nGCSys = "} {
		if !bytes.Contains(text, []byte(want)) {
			t.Fatalf("the memory statistics have no %q:\n%s", want, text)
		}
	}
	cancel()
	if code := <-done; code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}

// TestMaintainRefusesALogThatDoesNotExist: a mistyped --log fails at once,
// exit 1, naming the path, instead of retrying every pass for ever.
func TestMaintainRefusesALogThatDoesNotExist(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no", "such", "log")
	t.Chdir(t.TempDir())
	t.Setenv(configEnv, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errOut bytes.Buffer
	code := Run(ctx, []string{"maintain", "--role", "seal", "--every", "50ms", "--log", missing}, strings.NewReader(""), &bytes.Buffer{}, &errOut)
	if ctx.Err() != nil {
		t.Fatalf("maintain --log %s still ran after 30s:\n%s", missing, errOut.String())
	}
	if code != ExitFailure || !strings.Contains(errOut.String(), "no log at "+missing) {
		t.Fatalf("exit %d, want %d naming %s; stderr:\n%s", code, ExitFailure, missing, errOut.String())
	}
	if strings.Contains(errOut.String(), "retrying") {
		t.Errorf("it retried before giving up:\n%s", errOut.String())
	}
}

// TestMaintainLogLinesNameTheRoleOnce: a log that exists but will not open
// is retried each pass (a transient failure), and each line says the role
// once.
func TestMaintainLogLinesNameTheRoleOnce(t *testing.T) {
	broken := filepath.Join(t.TempDir(), "broken")
	if err := os.MkdirAll(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, logstore.BufferFile), []byte("not a database"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	t.Setenv(configEnv, "")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var errOut bytes.Buffer
	if code := Run(ctx, []string{"maintain", "--role", "seal", "--every", "50ms", "--log", broken}, strings.NewReader(""), &bytes.Buffer{}, &errOut); code != ExitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut.String())
	}
	retries := 0
	for _, line := range strings.Split(errOut.String(), "\n") {
		if !strings.Contains(line, "cannot open log") {
			continue
		}
		retries++
		if n := strings.Count(line, "role="); n != 1 {
			t.Errorf("the line names the role %d times: %s", n, line)
		}
	}
	if retries == 0 {
		t.Fatalf("no retry was logged:\n%s", errOut.String())
	}
}

func syscallKill(pid int) error { return unix.Kill(pid, unix.SIGUSR1) }

// TestServesChildCommandLineIsWhatMaintainParses: the command line serve's
// supervisor renders for a child (logstore.MaintainCommandLine, every root and role
// flag set) is accepted by this command tree: it gets as far as opening the
// log, never a usage error (exit 2), and logs JSON as asked.
func TestServesChildCommandLineIsWhatMaintainParses(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no", "such", "log")
	cfgFile := filepath.Join(dir, "streamcast.yaml")
	if err := os.WriteFile(cfgFile, []byte("log: {level: info}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	t.Setenv(configEnv, "")
	line := logstore.MaintainCommandLine(cfgFile, "debug", "json", logstore.MaintainArgs{
		Role: logstore.RoleClean, Every: time.Second, FlushEvery: time.Minute, Logs: []string{missing},
		Override: logstore.Override{StagingRetention: time.Hour, StagingMaxBytes: 4096, DeleteGrace: time.Minute, LocalDeleteGrace: time.Second,
			PublishedSnapshotRetention: time.Hour, S3Endpoint: "http://127.0.0.1:1", S3Region: "r", S3PathStyle: true},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errOut bytes.Buffer
	code := Run(ctx, line, strings.NewReader(""), &bytes.Buffer{}, &errOut)
	if code != ExitFailure || !strings.Contains(errOut.String(), "no log at "+missing) {
		t.Fatalf("%q: exit %d, want %d (the missing log, not a usage error); stderr:\n%s", line, code, ExitFailure, errOut.String())
	}
}

package logstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
)

func TestRunRoleSealsAndCleansOverPasses(t *testing.T) {
	ctx := context.Background()
	var logs []*Log
	var dirs []string
	exp := []expectation{{}, {}}
	for i := range 2 {
		l := createLog(t, schemaAny(), Config{TargetSealBytes: 2 << 10})
		for g := range 50 {
			rows := batch(fmt.Sprintf("l%d-%d", i, g), 4)
			first, err := l.Append(ctx, rows, int64(g), nil)
			if err != nil {
				t.Fatal(err)
			}
			exp[i].add(first, int64(g), rows)
		}
		logs = append(logs, l)
		dirs = append(dirs, l.Dir())
	}
	// A log that is there but does not open (its buffer.db is not a
	// database): reported on each pass, retried, and no obstacle to the
	// others.
	broken := filepath.Join(t.TempDir(), "broken")
	if err := os.MkdirAll(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, bufferFile), []byte("not a database"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	logger := log.New(&out)
	logger.SetLevel(log.DebugLevel)
	flush := make(chan struct{}, 1)
	flush <- struct{}{}
	// Seal: the first pass seals whole targets, the forced second flushes.
	err := RunRole(ctx, RoleSeal, append(dirs, broken), RoleOptions{Every: time.Millisecond, Passes: 2, Flush: flush, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	err = RunRole(ctx, RoleClean, dirs, RoleOptions{Every: time.Millisecond, Passes: 2, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range logs {
		var groups, files int
		l.rdb.QueryRow(`SELECT count(*) FROM groups`).Scan(&groups)
		l.rdb.QueryRow(`SELECT count(*) FROM files`).Scan(&files)
		if groups != 0 || files < 2 {
			t.Fatalf("log %d after seal+clean passes: %d groups buffered, %d files", i, groups, files)
		}
		checkFilesDir(t, l)
		if err := exp[i].check(scanAll(t, l, 1, 201), 1, 201); err != nil {
			t.Fatal(err)
		}
	}
	// The broken log was reported on each pass, with the role once, and
	// did not stop the others.
	var reported int
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.Contains(line, "cannot open log") {
			continue
		}
		reported++
		if n := strings.Count(line, "role="); n != 1 {
			t.Errorf("the line names the role %d times, want once: %s", n, line)
		}
	}
	if reported != 2 {
		t.Fatalf("the broken log was reported %d times, want 2:\n%s", reported, out.String())
	}
	if !strings.Contains(out.String(), "sealed") || !strings.Contains(out.String(), "cleaned") {
		t.Fatalf("passes that did work were not logged:\n%s", out.String())
	}
}

func TestRunRoleFlushesAtWallClockMultiples(t *testing.T) {
	ctx := context.Background()
	l := createLog(t, schemaAny(), Config{}) // a target far above what is buffered
	if _, err := l.Append(ctx, batch("x", 3), 1, nil); err != nil {
		t.Fatal(err)
	}
	files := func() (n int) {
		l.rdb.QueryRow(`SELECT count(*) FROM files`).Scan(&n)
		return n
	}
	// 100ms before a 10s boundary, with an hour between passes.
	start := time.Date(2026, 1, 1, 0, 0, 9, 900_000_000, time.UTC)
	opts := RoleOptions{Every: time.Hour, FlushEvery: 10 * time.Second}

	// A pass before the boundary cuts nothing: the rows are far below the
	// target, and it is no multiple of the flush interval yet.
	one := opts
	one.Passes = 1
	one.Clock = func() time.Time { return start }
	if err := RunRole(ctx, RoleSeal, []string{l.Dir()}, one); err != nil {
		t.Fatal(err)
	}
	if n := files(); n != 0 {
		t.Fatalf("%d files sealed by a pass before the flush boundary", n)
	}

	// With the clock running from there, only the boundary can wake the
	// loop for its second pass within the hour, and that pass flushes.
	two := opts
	two.Passes = 2
	base := time.Now()
	two.Clock = func() time.Time { return start.Add(time.Since(base)) }
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := RunRole(wctx, RoleSeal, []string{l.Dir()}, two); err != nil {
		t.Fatal(err)
	}
	if wctx.Err() != nil {
		t.Fatal("the loop did not wake at the 10s boundary for its second pass")
	}
	if n := files(); n != 1 {
		t.Fatalf("%d files after the pass at the boundary, want the flush's 1", n)
	}
}

// TestRunRoleRefusesALogThatDoesNotExist: a mistyped --log is an error at
// once, naming the path, not a retry every pass for ever.
func TestRunRoleRefusesALogThatDoesNotExist(t *testing.T) {
	l := createLog(t, schemaAny(), Config{})
	missing := filepath.Join(t.TempDir(), "no", "such", "log")
	var out bytes.Buffer
	err := RunRole(context.Background(), RoleSeal, []string{l.Dir(), missing},
		RoleOptions{Every: time.Millisecond, Passes: 1, Logger: log.New(&out)})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("RunRole over %s: %v, want an error naming it", missing, err)
	}
	if out.Len() != 0 {
		t.Errorf("a pass ran before the refusal:\n%s", out.String())
	}
}

func TestRunRoleRefusesBadOptions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		role Role
		dirs []string
		opts RoleOptions
	}{
		{"frobnicate", []string{"x"}, RoleOptions{Every: time.Second}},
		{RoleSeal, nil, RoleOptions{Every: time.Second}},
		{RoleSeal, []string{"x"}, RoleOptions{}},
		{RoleSeal, []string{"x"}, RoleOptions{Every: time.Second, FlushEvery: -1}},
		{RoleRetain, []string{"x"}, RoleOptions{Every: time.Second}}, // no Retain step
	} {
		if err := RunRole(ctx, tc.role, tc.dirs, tc.opts); err == nil {
			t.Errorf("RunRole(%q, %v, %+v) succeeded", tc.role, tc.dirs, tc.opts)
		}
	}
}

// TestRunRoleRetainCallsTheStepWithEachLog: the retain role runs the
// caller's step (the stream retention pass, which lives above this
// package) once per log per pass, on a Maintainer handle carrying the
// process's clock and overrides.
func TestRunRoleRetainCallsTheStepWithEachLog(t *testing.T) {
	a := createLog(t, schemaAny(), Config{})
	b := createLog(t, schemaAny(), Config{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := map[string]int{}
	err := RunRole(context.Background(), RoleRetain, []string{a.Dir(), b.Dir()}, RoleOptions{
		Every: time.Millisecond, Passes: 2, Clock: func() time.Time { return t0 },
		Override: Config{RetentionGrace: 3 * time.Minute},
		Retain: func(_ context.Context, l *Log) (int64, error) {
			if l.Mode() != Maintainer || l.Policy().RetentionGrace != 3*time.Minute || !l.now().Equal(t0) {
				t.Errorf("retain step got %s in mode %s, grace %s, time %s; want a Maintainer with the override and the clock", l.Dir(), l.Mode(), l.Policy().RetentionGrace, l.now())
			}
			seen[l.Dir()]++
			return 0, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen[a.Dir()] != 2 || seen[b.Dir()] != 2 {
		t.Fatalf("retain step calls %v; want two per log", seen)
	}
}

package logstore

import (
	"bytes"
	"context"
	"fmt"
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
	missing := filepath.Join(t.TempDir(), "not-yet")
	var out bytes.Buffer
	logger := log.New(&out)
	logger.SetLevel(log.DebugLevel)
	flush := make(chan struct{}, 1)
	flush <- struct{}{}
	// Seal: the first pass seals whole targets, the forced second flushes.
	err := RunRole(ctx, RoleSeal, append(dirs, missing), RoleOptions{Every: time.Millisecond, Passes: 2, Flush: flush, Logger: logger})
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
	// The missing log was reported on each pass, and did not stop the others.
	if n := strings.Count(out.String(), "cannot open log"); n != 2 {
		t.Fatalf("the missing log was reported %d times, want 2:\n%s", n, out.String())
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
	// The loop starts 100ms before a 10s boundary of its clock, with an
	// hour between passes: only the flush boundary can wake it.
	virtual := time.Date(2026, 1, 1, 0, 0, 9, 900_000_000, time.UTC)
	base := time.Now()
	clock := func() time.Time { return virtual.Add(time.Since(base)) }
	ctx2, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- RunRole(ctx2, RoleSeal, []string{l.Dir()}, RoleOptions{Every: time.Hour, FlushEvery: 10 * time.Second, Now: clock})
	}()
	time.Sleep(50 * time.Millisecond)
	if n := files(); n != 0 {
		t.Fatalf("%d files sealed before the flush boundary", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for files() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("no flush at the 10s boundary")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
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
	} {
		if err := RunRole(ctx, tc.role, tc.dirs, tc.opts); err == nil {
			t.Errorf("RunRole(%q, %v, %+v) succeeded", tc.role, tc.dirs, tc.opts)
		}
	}
}

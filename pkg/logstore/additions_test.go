package logstore

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestRunTakesAnAddedLogWithoutRestarting: a log handed to a running Maintain
// through Additions is stepped at once, during the pause, while the logs
// Maintain had wait for their next pass; a log it has already is not stepped
// again; a directory that holds no log, or a cache log for a role that
// never runs over one, is refused and nothing of that request is queued.
func TestRunTakesAnAddedLogWithoutRestarting(t *testing.T) {
	a := newLog(t, Config{})
	b := newLog(t, Config{})
	c := newLog(t, Config{})
	var mu sync.Mutex
	seen := map[string]int{}
	adds := NewAdditions(RoleRetain)
	runInBackground(t, RoleRetain, []string{a.Dir()}, MaintainOptions{
		Every:     time.Hour, // no second pass within the test
		Additions: adds,
		Retain: func(_ context.Context, l *Log) (int64, error) {
			mu.Lock()
			seen[l.Dir()]++
			mu.Unlock()
			return 0, nil
		},
	})
	steps := func(dir string) int {
		mu.Lock()
		defer mu.Unlock()
		return seen[dir]
	}
	waitUntil(t, "the first pass", 20*time.Second, func() bool { return steps(a.Dir()) == 1 })
	if err := adds.Add([]string{b.Dir(), filepath.Join(t.TempDir(), "nolog")}, nil); err == nil {
		t.Errorf("a directory without a log was taken")
	}
	if err := adds.Add(nil, []string{b.Dir()}); err == nil {
		t.Errorf("a cache log was taken for the retain role")
	}
	if err := adds.Add([]string{b.Dir(), a.Dir()}, nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a step of the added log", 20*time.Second, func() bool { return steps(b.Dir()) == 1 })
	// Added twice (a repeated request): taken once, stepped no more.
	if err := adds.Add([]string{b.Dir()}, nil); err != nil {
		t.Fatal(err)
	}
	if err := adds.Add([]string{c.Dir()}, nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a step of the log added last", 20*time.Second, func() bool { return steps(c.Dir()) == 1 })
	if n := steps(a.Dir()); n != 1 {
		t.Errorf("the log Maintain had was stepped %d times; want 1: an addition steps only the logs added", n)
	}
	if n := steps(b.Dir()); n != 1 {
		t.Errorf("the log added twice was stepped %d times; want 1", n)
	}
}

package broker

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/wire"
)

// TestRepeatedCommitFailuresAreLoggedOncePerIntervalThenRecovered: a commit
// that keeps failing (a full disk fails every group) gives one ERROR line,
// then one line per interval carrying the count it stood for, then one
// INFO line once commits succeed again; not one line per group (a full
// disk once gave 12,163 in 20 s).
func TestRepeatedCommitFailuresAreLoggedOncePerIntervalThenRecovered(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	var failing atomic.Bool
	srv := startServer(t, testConfig(t), Options{
		Logger: log.New(logs),
		Clock:  func() time.Time { return time.Unix(0, now.Load()) },
		appendHook: func(ctx context.Context, l *logstore.Log, rows [][]byte, ts int64, marks []logstore.Mark) (int64, error) {
			if failing.Load() {
				return 0, errors.New("database or disk is full (test)")
			}
			return l.Append(ctx, rows, ts, marks)
		},
	})
	p := dialPublisher(t, srv, "trades")
	failedCommit := func(i int) {
		t.Helper()
		if r := p.roundTrip(trade(i)); r.Error != wire.ReplyCommitFailed {
			t.Fatalf("frame %d: reply %+v, want commit_failed", i, r)
		}
	}
	count := func(s string) int { return strings.Count(logs.String(), s) }

	failing.Store(true)
	const n = 200
	for i := 0; i < n; i++ {
		failedCommit(i)
	}
	if got := count("commit failed"); got != 1 {
		t.Fatalf("%d failed commits within the interval logged %d lines, want 1:\n%s", n, got, logs)
	}
	now.Add(int64(errorSummaryEvery))
	failedCommit(n)
	if got := count("commit failed"); got != 2 || !strings.Contains(logs.String(), "repeated=199") {
		t.Fatalf("after the interval want a second line with repeated=199, got %d lines:\n%s", got, logs)
	}
	failing.Store(false)
	if r := p.roundTrip(trade(n + 1)); r.Error != "" {
		t.Fatalf("commit after recovery: %+v", r)
	}
	if !strings.Contains(logs.String(), "commits succeed again") || !strings.Contains(logs.String(), "failures=201") {
		t.Fatalf("no recovery line with failures=201:\n%s", logs)
	}
	if got := count("commit failed"); got != 2 {
		t.Fatalf("commit failed lines = %d after recovery, want 2", got)
	}
}

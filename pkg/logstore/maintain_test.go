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
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/pkg/schema"
)

// newLog creates a log under a temp dir, open for writing as serve holds
// it, and closes it at cleanup.
func newLog(t testing.TB, cfg Config, opts ...Option) *Log {
	t.Helper()
	l, err := Create(filepath.Join(t.TempDir(), "s", "log"), schema.Any(), named(cfg), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// appendRows appends n rows tagged with tag, in one group, and returns
// them.
func appendRows(t *testing.T, l *Log, tag string, n int) [][]byte {
	t.Helper()
	rows := make([][]byte, n)
	for i := range rows {
		rows[i] = fmt.Appendf(nil, `{"tag":"%s-%d","pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`, tag, i)
	}
	if _, err := l.Append(context.Background(), rows, time.Now().UnixMicro(), nil); err != nil {
		t.Fatal(err)
	}
	return rows
}

// checkRows fails unless the log holds exactly want, from offset 1.
func checkRows(t *testing.T, l *Log, want [][]byte) {
	t.Helper()
	var got [][]byte
	err := l.Scan(context.Background(), 1, int64(len(want))+1, nil, func(_, _ int64, row []byte) error {
		got = append(got, bytes.Clone(row))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s holds %d rows, want %d", l.Dir(), len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: offset %d holds %s, want %s", l.Dir(), i+1, got[i], want[i])
		}
	}
}

func status(t *testing.T, l *Log) Status {
	t.Helper()
	st, err := l.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// runInBackground runs Maintain until the test ends.
func runInBackground(t *testing.T, role Role, dirs []string, opts MaintainOptions) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := Maintain(ctx, role, dirs, opts); err != nil {
			t.Errorf("Maintain(%s): %v", role, err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func TestRunSealsAndCleansOverPasses(t *testing.T) {
	ctx := context.Background()
	var logs []*Log
	var dirs []string
	var want [][][]byte
	for i := range 2 {
		l := newLog(t, Config{TargetSealBytes: 2 << 10})
		var rows [][]byte
		for g := range 50 {
			rows = append(rows, appendRows(t, l, fmt.Sprintf("l%d-%d", i, g), 4)...)
		}
		logs, dirs, want = append(logs, l), append(dirs, l.Dir()), append(want, rows)
	}
	// A log that is there but does not open (its buffer.db is not a
	// database): reported once however often it fails, retried, and no
	// obstacle to the others.
	broken := filepath.Join(t.TempDir(), "broken")
	if err := os.MkdirAll(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, BufferFile), []byte("not a database"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	logger := log.New(&out)
	logger.SetLevel(log.DebugLevel)
	flush := make(chan struct{}, 1)
	flush <- struct{}{}
	// Seal: the first pass seals whole targets, the forced second flushes.
	err := Maintain(ctx, RoleSeal, append(dirs, broken), MaintainOptions{Every: time.Millisecond, Passes: 3, Flush: flush, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	err = Maintain(ctx, RoleClean, dirs, MaintainOptions{Every: time.Millisecond, Passes: 2, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range logs {
		if st := status(t, l); st.BufferedRows != 0 || st.LocalFiles < 2 {
			t.Fatalf("log %d after seal+clean passes: %d rows buffered, %d files", i, st.BufferedRows, st.LocalFiles)
		}
		checkRows(t, l, want[i])
	}
	// The broken log failed on each of the 3 passes and was reported
	// once, with the role once.
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
	if reported != 1 {
		t.Fatalf("the broken log was reported %d times in 3 passes, want once:\n%s", reported, out.String())
	}
	if !strings.Contains(out.String(), "sealed") || !strings.Contains(out.String(), "cleaned") {
		t.Fatalf("passes that did work were not logged:\n%s", out.String())
	}
}

func TestRunFlushesAtWallClockMultiples(t *testing.T) {
	ctx := context.Background()
	l := newLog(t, Config{}) // a target far above what is buffered
	appendRows(t, l, "x", 3)
	// 100ms before a 10s boundary, with an hour between passes.
	start := time.Date(2026, 1, 1, 0, 0, 9, 900_000_000, time.UTC)
	opts := MaintainOptions{Every: time.Hour, FlushEvery: 10 * time.Second}

	// A pass before the boundary cuts nothing: the rows are far below the
	// target, and it is no multiple of the flush interval yet.
	one := opts
	one.Passes = 1
	one.Clock = func() time.Time { return start }
	if err := Maintain(ctx, RoleSeal, []string{l.Dir()}, one); err != nil {
		t.Fatal(err)
	}
	if n := status(t, l).LocalFiles; n != 0 {
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
	if err := Maintain(wctx, RoleSeal, []string{l.Dir()}, two); err != nil {
		t.Fatal(err)
	}
	if wctx.Err() != nil {
		t.Fatal("the loop did not wake at the 10s boundary for its second pass")
	}
	if n := status(t, l).LocalFiles; n != 1 {
		t.Fatalf("%d files after the pass at the boundary, want the flush's 1", n)
	}
}

// TestRunSealsAndCleansALogThatWakesAfterIdling: with more logs than
// MaxOpen, every log is closed between its steps while idle; one that then
// receives rows is still woken: sealed (a full target by its commit alone,
// or a few rows at the next flush boundary) and evicted from the buffer by
// clean.
func TestRunSealsAndCleansALogThatWakesAfterIdling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		flushEvery time.Duration
		rows       int
	}{
		{"a full target, no flush schedule", 0, 200},
		{"a few rows, at the flush boundary", 200 * time.Millisecond, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs []*Log
			var dirs []string
			for range 8 {
				l := newLog(t, Config{TargetSealBytes: 2 << 10})
				logs, dirs = append(logs, l), append(dirs, l.Dir())
			}
			for _, role := range []Role{RoleSeal, RoleClean} {
				ready := make(chan struct{})
				runInBackground(t, role, dirs, MaintainOptions{Every: 5 * time.Millisecond, FlushEvery: tc.flushEvery, MaxOpen: 2,
					Ready: func() { close(ready) }})
				<-ready
			}
			// Let both idle for many passes, so the LRU has closed every
			// log and what they know of each has settled.
			time.Sleep(500 * time.Millisecond)
			l := logs[3]
			rows := appendRows(t, l, "late", tc.rows)
			waitUntil(t, "the late rows sealed and evicted", 20*time.Second, func() bool {
				st := status(t, l)
				return st.LocalFiles >= 1 && st.BufferedRows < int64(tc.rows)
			})
			checkRows(t, l, rows)
			for i, o := range logs {
				if st := status(t, o); i != 3 && (st.LocalFiles != 0 || st.BufferedRows != 0) {
					t.Fatalf("idle log %d: %+v", i, st)
				}
			}
		})
	}
}

// TestRunDeletesWhatCameDueWhileTheLogIdled: a local file queued for
// deletion with a grace is deleted by clean once the grace is over, though
// nothing was committed to the log since.
func TestRunDeletesWhatCameDueWhileTheLogIdled(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	// No room for local files: clean takes a published one out at once.
	l := newLog(t, Config{StagingMaxBytes: 1, LocalDeleteGrace: time.Hour}, WithClock(clock))
	appendRows(t, l, "x", 10)
	if _, err := l.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	runInBackground(t, RoleClean, []string{l.Dir()}, MaintainOptions{Every: 5 * time.Millisecond, Clock: clock, MaxOpen: 1})
	waitUntil(t, "the published file taken out and queued", 20*time.Second, func() bool {
		st := status(t, l)
		return st.LocalFiles == 0 && st.PendingDeletes == 1
	})
	time.Sleep(50 * time.Millisecond) // passes over an idle log
	if st := status(t, l); st.PendingDeletes != 1 {
		t.Fatalf("the queued file went before its grace: %+v", st)
	}
	advance(time.Hour + time.Second)
	waitUntil(t, "the queued file deleted once its grace is over", 20*time.Second, func() bool {
		return status(t, l).PendingDeletes == 0
	})
	entries, err := os.ReadDir(filepath.Join(l.Dir(), FilesDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("files/ still holds %d entries", len(entries))
	}
}

// TestRunHoldsAtMostMaxOpenLogsOpen: the process's descriptors grow with
// MaxOpen, not with the number of logs.
func TestRunHoldsAtMostMaxOpenLogsOpen(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc/self/fd to count descriptors")
	}
	fds := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	const logs, maxOpen = 24, 3
	var dirs []string
	for i := range logs {
		l := newLog(t, Config{})
		appendRows(t, l, fmt.Sprint(i), 3)
		dirs = append(dirs, l.Dir())
		// Closed: SQLite keeps a closed connection's descriptors while
		// another connection of the process has the same file open, which
		// would blur the count; serve's writer is another process.
		l.Close()
	}
	// What one log open for maintenance costs, after a step.
	base := fds()
	m, err := Open(dirs[0], Maintainer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Seal(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	perLog := fds() - base
	m.Close()
	if perLog <= 0 {
		t.Fatalf("an open log costs %d descriptors; the test cannot tell", perLog)
	}
	base = fds()
	peak := 0
	flush := make(chan struct{}, 1)
	for pass := range 4 {
		if pass == 2 {
			flush <- struct{}{} // a pass over every log
		}
		err := Maintain(context.Background(), RoleSeal, dirs, MaintainOptions{Every: time.Millisecond, Passes: 1, Flush: flush, MaxOpen: maxOpen,
			Ready: func() { peak = max(peak, fds()-base) }})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("an open log costs %d descriptors; %d logs with at most %d open peaked at %d more", perLog, logs, maxOpen, peak)
	if peak > maxOpen*perLog+2 {
		t.Fatalf("%d logs held %d descriptors open, more than %d open logs cost (%d each)", logs, peak, maxOpen, perLog)
	}
}

// TestRunRefusesALogThatDoesNotExist: a mistyped --log is an error at
// once, naming the path, not a retry every pass for ever.
func TestRunRefusesALogThatDoesNotExist(t *testing.T) {
	l := newLog(t, Config{})
	missing := filepath.Join(t.TempDir(), "no", "such", "log")
	var out bytes.Buffer
	err := Maintain(context.Background(), RoleSeal, []string{l.Dir(), missing},
		MaintainOptions{Every: time.Millisecond, Passes: 1, Logger: log.New(&out)})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Maintain over %s: %v, want an error naming it", missing, err)
	}
	if out.Len() != 0 {
		t.Errorf("a pass ran before the refusal:\n%s", out.String())
	}
}

// TestRunTakesALogAnotherProcessIsOpening: a log whose WAL index another
// process is rebuilding at that instant (its first open: the index cut
// short, or not yet initialised) is a log, not a missing one, and a quiet
// log in that state is looked at again rather than opened.
func TestRunTakesALogAnotherProcessIsOpening(t *testing.T) {
	l := newLog(t, Config{})
	dir := l.Dir()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "buffer.db-shm"), make([]byte, 48), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadActivity(dir); !errors.Is(err, ErrInFlux) {
		t.Fatalf("the test's index: %v, want it in flux", err)
	}
	var out bytes.Buffer
	if err := Maintain(context.Background(), RoleSeal, []string{dir}, MaintainOptions{Every: time.Millisecond, Passes: 2, Logger: log.New(&out)}); err != nil {
		t.Fatalf("Maintain over a log being opened: %v\n%s", err, out.String())
	}
}

func TestRunRefusesBadOptions(t *testing.T) {
	ctx := context.Background()
	l := newLog(t, Config{})
	for _, tc := range []struct {
		role Role
		dirs []string
		opts MaintainOptions
	}{
		{"frobnicate", []string{l.Dir()}, MaintainOptions{Every: time.Second}},
		{RoleSeal, nil, MaintainOptions{Every: time.Second}},
		{RoleSeal, []string{l.Dir()}, MaintainOptions{}},
		{RoleSeal, []string{l.Dir()}, MaintainOptions{Every: time.Second, FlushEvery: -1}},
		{RoleSeal, []string{l.Dir()}, MaintainOptions{Every: time.Second, MaxOpen: -1}},
		{RoleRetain, []string{l.Dir()}, MaintainOptions{Every: time.Second}}, // no Retain step
	} {
		if err := Maintain(ctx, tc.role, tc.dirs, tc.opts); err == nil {
			t.Errorf("Maintain(%q, %v, %+v) succeeded", tc.role, tc.dirs, tc.opts)
		}
	}
}

// TestRunRetainCallsTheStepWithEachLogEveryPass: the retain role runs the
// caller's step (the stream's retention pass, which lives above this
// package) once per log per pass, idle or not, on a Maintainer handle
// carrying the process's overrides.
func TestRunRetainCallsTheStepWithEachLogEveryPass(t *testing.T) {
	a := newLog(t, Config{})
	b := newLog(t, Config{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := map[string]int{}
	err := Maintain(context.Background(), RoleRetain, []string{a.Dir(), b.Dir()}, MaintainOptions{
		Every: time.Millisecond, Passes: 3, Clock: func() time.Time { return t0 },
		Override: Config{RetentionGrace: 3 * time.Minute},
		Retain: func(_ context.Context, l *Log) (int64, error) {
			if l.Mode() != Maintainer || l.Policy().RetentionGrace != 3*time.Minute {
				t.Errorf("retain step got %s in mode %s, grace %s; want a Maintainer with the override", l.Dir(), l.Mode(), l.Policy().RetentionGrace)
			}
			seen[l.Dir()]++
			return 0, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen[a.Dir()] != 3 || seen[b.Dir()] != 3 {
		t.Fatalf("retain step calls %v; want three per log, one a pass, though nothing was committed", seen)
	}
}

// BenchmarkIdleCheck is what a pass costs for one idle log: reading its
// Activity, with serve's writer holding it open.
func BenchmarkIdleCheck(b *testing.B) {
	l := newLog(b, Config{})
	for b.Loop() {
		if _, err := ReadActivity(l.Dir()); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRunIsReadyBeforeItsFirstPass: Ready comes once every log is known to
// exist, before any step runs, so a child over thousands of logs reports
// ready within serve's start-up bound however long its first pass takes.
func TestRunIsReadyBeforeItsFirstPass(t *testing.T) {
	a, b := newLog(t, Config{}), newLog(t, Config{})
	var readyBeforeStep []bool
	ready := false
	err := Maintain(context.Background(), RoleRetain, []string{a.Dir(), b.Dir()}, MaintainOptions{
		Every: time.Millisecond, Passes: 1,
		Ready: func() { ready = true },
		Retain: func(context.Context, *Log) (int64, error) {
			readyBeforeStep = append(readyBeforeStep, ready)
			return 0, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(readyBeforeStep) != 2 || !readyBeforeStep[0] || !readyBeforeStep[1] {
		t.Fatalf("ready before each step: %v; want ready before the first", readyBeforeStep)
	}
}

// TestRunFlushBoundaryWakesOnlySealAndPublish: a flush boundary is seal's
// and publish's; retain, whose every pass steps every log, keeps its own
// cadence (waking it at each minute's boundary would open every log).
func TestRunFlushBoundaryWakesOnlySealAndPublish(t *testing.T) {
	t.Parallel()
	l := newLog(t, Config{})
	// 100ms before a 10s boundary, with an hour between passes: only the
	// boundary could bring the second pass within the test.
	start := time.Date(2026, 1, 1, 0, 0, 9, 900_000_000, time.UTC)
	base := time.Now()
	steps := 0
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := Maintain(ctx, RoleRetain, []string{l.Dir()}, MaintainOptions{
		Every: time.Hour, FlushEvery: 10 * time.Second, Passes: 2,
		Clock: func() time.Time { return start.Add(time.Since(base)) },
		Retain: func(context.Context, *Log) (int64, error) {
			steps++
			return 0, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// TestRunFlushesAtWallClockMultiples shows the same boundary wakes
	// seal within its 100ms; 2s is twenty times that.
	if ctx.Err() == nil || steps != 1 {
		t.Fatalf("retain ran %d passes in 2s with an hour between them: the flush boundary woke it", steps)
	}
}

// TestRunRareRoleClosesItsLogsAfterAPass: a role whose passes are a minute
// or more apart holds no log open between them, though it stepped every
// log (retain kept MaxOpen logs, five descriptors each, open for good).
func TestRunRareRoleClosesItsLogsAfterAPass(t *testing.T) {
	var dirs []string
	for range 3 {
		dirs = append(dirs, newLog(t, Config{}).Dir())
	}
	steps := 0
	for _, tc := range []struct {
		every time.Duration
		open  int
	}{{time.Second, 3}, {time.Hour, 0}} {
		r := newRunner(RoleRetain, dirs, MaintainOptions{Every: tc.every, Retain: func(context.Context, *Log) (int64, error) {
			steps++
			return 0, nil
		}})
		r.pass(context.Background(), false, false)
		if n := r.open.Len(); n != tc.open {
			t.Errorf("after a pass with %s between passes, %d logs are open; want %d", tc.every, n, tc.open)
		}
		r.closeAll()
	}
	if steps != 6 {
		t.Fatalf("%d steps over two passes of 3 logs; want 6", steps)
	}
}

// TestRunFirstFlushSkipsLogsWithNothingUnpublished: a log whose every row
// is published (here: none were ever committed) has nothing for a flush,
// so the first flush boundary after a start opens only the logs with
// rows to cut (it opened every log, a minute after every start).
func TestRunFirstFlushSkipsLogsWithNothingUnpublished(t *testing.T) {
	empty := newLog(t, Config{})
	busy := newLog(t, Config{}) // a target far above what is buffered
	appendRows(t, busy, "x", 3)
	r := newRunner(RoleSeal, []string{empty.Dir(), busy.Dir()}, MaintainOptions{Every: time.Millisecond})
	defer r.closeAll()
	ctx := context.Background()
	r.pass(ctx, false, false)
	if n := status(t, busy).LocalFiles; n != 0 {
		t.Fatalf("the first pass sealed %d files below the target", n)
	}
	r.closeAll()
	r.pass(ctx, true, false)
	if r.opened != 1 {
		t.Errorf("the flush pass opened %d logs; want only the one with buffered rows", r.opened)
	}
	if n := status(t, busy).LocalFiles; n != 1 {
		t.Fatalf("the flush pass left %d files in the busy log; want its rows cut into 1", n)
	}
}

// TestRunGivesMemoryBackOnceIdle: a pass that ends with no log open gives
// freed memory back to the system (the runtime would keep up to its
// collection goal, twice the live heap, for good), at most once per
// freeIdleEvery; a pass with a log open does not.
func TestRunGivesMemoryBackOnceIdle(t *testing.T) {
	l := newLog(t, Config{})
	appendRows(t, l, "x", 3)
	r := newRunner(RoleSeal, []string{l.Dir()}, MaintainOptions{Every: time.Millisecond})
	defer r.closeAll()
	frees := 0
	r.free = func() { frees++ }
	ctx := context.Background()
	var got []int
	for range 3 {
		r.pass(ctx, false, false)
		r.state[l.Dir()].nextCheck = time.Time{} // look at the log every pass
		got = append(got, frees)
	}
	// The first pass steps the log and keeps it open; the second finds it
	// idle and closes it; the third is within freeIdleEvery of that.
	if fmt.Sprint(got) != "[0 1 1]" {
		t.Fatalf("memory given back after passes 1-3: %v times; want [0 1 1]", got)
	}
}

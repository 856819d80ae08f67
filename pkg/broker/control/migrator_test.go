package control

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/broker/supervise"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
)

// threadPriority is what the kernel schedules a thread by: its nice value
// and its policy (0 SCHED_OTHER, 5 SCHED_IDLE).
type threadPriority struct{ nice, policy int }

// priorityOfThreads returns the priority of every thread of process pid,
// from /proc/<pid>/task/<tid>/stat (fields 19 and 41).
func priorityOfThreads(t *testing.T, pid int) map[string]threadPriority {
	t.Helper()
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("the threads of pid %d: %v (%d found)", pid, err, len(tasks))
	}
	out := map[string]threadPriority{}
	for _, stat := range tasks {
		b, err := os.ReadFile(stat)
		if err != nil {
			t.Fatal(err)
		}
		// The command name is in parentheses and may hold spaces: the
		// fields are counted from after its closing one (field 3 on).
		rest := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		nice, err1 := strconv.Atoi(rest[19-3])
		policy, err2 := strconv.Atoi(rest[41-3])
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("%s: %v", stat, err)
		}
		out[filepath.Base(filepath.Dir(stat))] = threadPriority{nice, policy}
	}
	return out
}

// TestTheMigrationWorkerRunsNicedAndOutlivesAMigration starts the real
// worker process and checks the three things the neighbours' acks rely
// on: every one of its threads runs at the lowest priority (nice 19 and
// SCHED_IDLE), while the server's threads keep theirs (all but the one
// that forked it); one process serves migration after
// migration (its start-up is paid once), a migration's own failure
// included; and it ends once idle, and when the controller closes it.
func TestTheMigrationWorkerRunsNicedAndOutlivesAMigration(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the thread priorities are read from Linux's /proc")
	}
	exe := testkit.Streamcast(t)
	w := &migrationWorker{exe: exe, level: "warn", logger: log.New(os.Stderr), idle: time.Hour}
	defer w.close()
	if err := w.start(); err != nil {
		t.Fatal(err)
	}
	pid := w.proc.cmd.Process.Pid
	// A job on a root that holds no stream: the worker answers its
	// refusal, which proves it read the job and reached the migration.
	job := lifecycle.MigrateJob{Stream: "nothing-here", Root: t.TempDir(), Schema: []byte(`{"type":"object"}`)}
	for i := range 2 {
		if err := w.start(); err != nil {
			t.Fatal(err)
		}
		m, replaced, err := runFed(t, w, job)
		var je *lifecycle.JobError
		if !errors.As(err, &je) || m != nil {
			t.Fatalf("migration %d on an empty root: %v, %v; want the migration's own refusal", i, m, err)
		}
		if replaced && w.proc != nil {
			pid = w.proc.cmd.Process.Pid // a starved worker's successor
		}
		if w.proc == nil || w.proc.cmd.Process.Pid != pid {
			t.Fatalf("migration %d ran in another process than the first (pid %d): the worker must serve one after another", i, pid)
		}
	}
	// supervise.NewLowPriorityForker's: nice 19 and SCHED_IDLE, so that a
	// serving thread waking on a CPU the worker holds gets it at once.
	// Where the kernel keeps no schedstats, serve could not see the
	// worker starve, and it stays at nice 19 alone.
	const schedIdle = 5 // Linux's SCHED_IDLE
	lowest := threadPriority{nice: 19, policy: schedIdle}
	if _, _, ok := supervise.ProcessCPU(os.Getpid()); !ok {
		lowest.policy = 0
	}
	for tid, p := range priorityOfThreads(t, pid) {
		if p != lowest {
			t.Errorf("worker thread %s runs at nice %d, policy %d; want nice %d, policy %d (5 is SCHED_IDLE)", tid, p.nice, p.policy, lowest.nice, lowest.policy)
		}
	}
	// In the server, only the thread that forked the worker is lowered: it
	// forks and runs nothing else (supervise.Forker).
	lowered := 0
	for _, p := range priorityOfThreads(t, os.Getpid()) {
		if p != (threadPriority{}) {
			lowered++
		}
	}
	if lowered != 1 {
		t.Errorf("%d of the server's threads run lowered; want 1, the one that forked the worker: starting it lowered a thread the runtime still uses", lowered)
	}

	// Idle: the timer ends the process, and the next migration starts
	// another.
	p := w.proc
	w.mu.Lock()
	w.timer.Reset(time.Millisecond)
	w.mu.Unlock()
	select {
	case <-p.waited:
	case <-time.After(20 * time.Second):
		t.Fatal("the idle worker process did not end")
	}
	if err := w.start(); err != nil {
		t.Fatal(err)
	}
	if w.proc == nil || w.proc == p {
		t.Fatal("after the idle worker ended, start did not start another")
	}
	p = w.proc
	w.close()
	select {
	case <-p.waited:
	default:
		t.Fatal("close returned with the worker process still running")
	}
}

// TestAMigrationWorkerThatDiesIsReplaced kills the worker between
// migrations: the next migration gets an error naming the worker, never
// a hang, and the one after runs in a new process.
func TestAMigrationWorkerThatDiesIsReplaced(t *testing.T) {
	exe := testkit.Streamcast(t)
	w := &migrationWorker{exe: exe, level: "warn", logger: log.New(os.Stderr)}
	defer w.close()
	if err := w.start(); err != nil {
		t.Fatal(err)
	}
	p := w.proc
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.waited
	job := lifecycle.MigrateJob{Stream: "nothing-here", Root: t.TempDir()}
	_, err := w.run(context.Background(), job)
	if err == nil || !strings.Contains(err.Error(), "the migration worker process gave no answer") {
		t.Fatalf("a migration sent to a dead worker: %v; want the worker named", err)
	}
	if w.proc != nil {
		t.Fatal("the dead worker is still the worker")
	}
	if err := w.start(); err != nil {
		t.Fatal(err)
	}
	var je *lifecycle.JobError
	if _, _, err := runFed(t, w, job); !errors.As(err, &je) {
		t.Fatalf("the replacement worker: %v; want the migration's own refusal", err)
	}
}

// runFed runs job on w and, while the server ends the worker as starved,
// runs it again on a new worker, up to five times; replaced says it did.
// Beside the other packages of go test ./... on two cores, a process
// under SCHED_IDLE can get no CPU for half a second, and the server then
// ends it by design (watchStarvation); what these tests check needs a
// worker that ran.
func runFed(t *testing.T, w *migrationWorker, job lifecycle.MigrateJob) (m *lifecycle.Migration, replaced bool, err error) {
	t.Helper()
	for i := 0; ; i++ {
		m, err = w.run(context.Background(), job)
		if !errors.Is(err, errWorkerStarved) || i == 4 {
			return m, replaced, err
		}
		t.Logf("the worker starved on a loaded machine (%v); again on a new one in %d s", err, i+1)
		replaced = true
		time.Sleep(time.Duration(i+1) * time.Second) // let a burst of load pass
		if err := w.start(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStarvedNeedsAWindowOfWaitingWithAlmostNoCPU: a window counts
// towards ending a worker as starved only when, over it, the worker both
// ran for under a twentieth of it and waited for a CPU at least half of
// it; waiting for the disk or the network is no waiting for a CPU.
func TestStarvedNeedsAWindowOfWaitingWithAlmostNoCPU(t *testing.T) {
	const w = 250 * time.Millisecond
	for _, tc := range []struct {
		name        string
		ran, waited time.Duration
		want        bool
	}{
		{"behind a busy CPU", 1500 * time.Microsecond, 488 * time.Millisecond, true},
		{"behind a busy CPU, several threads waiting", 0, 3 * w, true},
		{"blocked on the disk or the network", 0, 0, false},
		{"runs now and then", 20 * time.Millisecond, 200 * time.Millisecond, false},
		{"runs freely", 240 * time.Millisecond, 5 * time.Millisecond, false},
		{"just under a twentieth, waiting half", w/20 - 1, w / 2, true},
		{"a twentieth", w / 20, w, false},
		{"waiting under half", 0, w/2 - 1, false},
	} {
		if got := starved(tc.ran, tc.waited, w); got != tc.want {
			t.Errorf("%s: starved(ran %v, waited %v, window %v) = %v; want %v", tc.name, tc.ran, tc.waited, w, got, tc.want)
		}
	}
}

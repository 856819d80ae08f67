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

	"github.com/streamcast/streamcast/internal/testbin"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
)

// niceOfThreads returns the nice value of every thread of process pid,
// from /proc/<pid>/task/<tid>/stat (field 19).
func niceOfThreads(t *testing.T, pid int) map[string]int {
	t.Helper()
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("the threads of pid %d: %v (%d found)", pid, err, len(tasks))
	}
	out := map[string]int{}
	for _, stat := range tasks {
		b, err := os.ReadFile(stat)
		if err != nil {
			t.Fatal(err)
		}
		// The command name is in parentheses and may hold spaces: the
		// fields are counted from after its closing one (field 3 on).
		rest := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		nice, err := strconv.Atoi(rest[19-3])
		if err != nil {
			t.Fatalf("%s: %v", stat, err)
		}
		out[filepath.Base(filepath.Dir(stat))] = nice
	}
	return out
}

// TestTheMigrationWorkerRunsNicedAndOutlivesAMigration starts the real
// worker process and checks the three things the neighbours' acks rely
// on: every one of its threads runs at the lowest priority, while the
// server's threads keep theirs (all but the one that forked it); one process serves migration after
// migration (its start-up is paid once), a migration's own failure
// included; and it ends once idle, and when the controller closes it.
func TestTheMigrationWorkerRunsNicedAndOutlivesAMigration(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the thread priorities are read from Linux's /proc")
	}
	exe := testbin.Streamcast(t)
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
		m, err := w.run(context.Background(), job)
		var je *lifecycle.JobError
		if !errors.As(err, &je) || m != nil {
			t.Fatalf("migration %d on an empty root: %v, %v; want the migration's own refusal", i, m, err)
		}
		if w.proc == nil || w.proc.cmd.Process.Pid != pid {
			t.Fatalf("migration %d ran in another process than the first (pid %d): the worker must serve one after another", i, pid)
		}
	}
	const lowest = 19 // supervise.NewLowPriorityForker's
	for tid, nice := range niceOfThreads(t, pid) {
		if nice != lowest {
			t.Errorf("worker thread %s runs at nice %d; want %d", tid, nice, lowest)
		}
	}
	// In the server, only the thread that forked the worker is niced: it
	// forks and runs nothing else (supervise.Forker).
	niced := 0
	for _, nice := range niceOfThreads(t, os.Getpid()) {
		if nice != 0 {
			niced++
		}
	}
	if niced != 1 {
		t.Errorf("%d of the server's threads run niced; want 1, the one that forked the worker: starting it lowered a thread the runtime still uses", niced)
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
	exe := testbin.Streamcast(t)
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
	if _, err := w.run(context.Background(), job); !errors.As(err, &je) {
		t.Fatalf("the replacement worker: %v; want the migration's own refusal", err)
	}
}

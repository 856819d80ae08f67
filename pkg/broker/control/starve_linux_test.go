package control_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/broker/supervise"
)

// pinProcess puts every thread of this process on CPU cpu. A thread
// inherits its creator's CPUs, so the threads the runtime makes later, and
// the processes forked from any of them, run there too. Twice over the
// threads, for one made while the first pass ran.
func pinProcess(cpu string) error {
	n, err := strconv.Atoi(cpu)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", childCPUEnv, cpu, err)
	}
	var set unix.CPUSet
	set.Set(n)
	for range 2 {
		tasks, err := filepath.Glob("/proc/self/task/*")
		if err != nil {
			return err
		}
		for _, task := range tasks {
			tid, err := strconv.Atoi(filepath.Base(task))
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
				return fmt.Errorf("pin thread %d to CPU %d: %w", tid, n, err)
			}
		}
	}
	return nil
}

// spinOn keeps CPU cpu busy at an ordinary priority from a thread of its
// own until stop is called (once or more).
func spinOn(t *testing.T, cpu int) (stop func()) {
	t.Helper()
	var set unix.CPUSet
	set.Set(cpu)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	pinned := make(chan error, 1)
	go func() {
		defer wg.Done()
		// Never unlocked: the thread ends with the goroutine, and no
		// pinned thread goes back to the runtime.
		runtime.LockOSThread()
		pinned <- unix.SchedSetaffinity(0, &set)
		for {
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	if err := <-pinned; err != nil {
		close(done)
		wg.Wait()
		t.Fatalf("pin the spinning thread to CPU %d: %v", cpu, err)
	}
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// TestAStarvedMigrationWorkerIsEndedAndTheServerFinishes: the migration
// worker runs at the lowest priority (SCHED_IDLE), so on a server whose
// CPUs never idle it would get no CPU, and its stream's writes would stay
// fenced until one did. The server and its worker are held to one CPU
// that another thread keeps busy: the server watches the worker starve,
// ends it, and finishes the migration in its own process from the
// worker's intent, in seconds, with the seam exact, and logs no warning.
func TestAStarvedMigrationWorkerIsEndedAndTheServerFinishes(t *testing.T) {
	if _, _, ok := supervise.ProcessCPU(os.Getpid()); !ok {
		t.Skip("the kernel keeps no schedstats: the worker runs at nice 19 alone, unwatched")
	}
	exe := brokertest.Executable(t)
	v2 := `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":"string"},"px":{"type":["number","null"]}},"required":["id","sym"]}`
	// The first CPU this process may run on: a container's CPU set need
	// not hold CPU 0.
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	cpu := 0
	for ; !allowed.IsSet(cpu); cpu++ {
		if cpu == len(allowed)*64 {
			t.Fatal("this process may run on no CPU")
		}
	}
	root := newRoot(t)
	c := startChild(t, root, "", childExeEnv+"="+exe, childCPUEnv+"="+strconv.Itoa(cpu))
	f := &fixture{base: c.base, ws: c.ws}
	f.create(t, "trades")
	f.setDesired(t, "trades", "serving")
	const rows = 1000
	if rep := publish(t, c.ws, "trades", 0, rows); rep["ok"] == nil {
		t.Fatalf("publish: %v", rep)
	}

	stop := spinOn(t, cpu)
	defer stop()
	t0 := time.Now()
	r := f.do(t, req{"POST", "/control/v1/streams/trades/migrations", `{"stream_id":"` + f.streamID(t, "trades") + `","schema":` + v2 + `}`, mut(f.etag(t, "trades"))})
	if r.status != http.StatusAccepted {
		t.Fatalf("migrate: %d %s", r.status, r.body)
	}
	loc := r.hdr.Get("Location")
	const bound = 15 * time.Second // without the watch, it was still running at this bound
	for {
		op := f.do(t, req{"GET", loc, "", nil}).json(t)
		if op["status"] == "succeeded" {
			break
		}
		if op["status"] == "failed" {
			t.Fatalf("the migration failed: %v\n%s", op, c.stderr)
		}
		if time.Since(t0) > bound {
			t.Fatalf("the migration is still %v %v after its 202, its worker starved on a busy CPU: the server did not end it and finish the migration itself", op["status"], bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(t0)
	stop()
	c.stop(t)
	if log := c.stderr.String(); !strings.Contains(log, "the migration finishes in the server's process") || !strings.Contains(log, "the migration worker process got no CPU") {
		t.Fatalf("the migration succeeded in %v, but the server's log does not show the starved worker ended:\n%s", took, log)
	}
	// Ending a starved worker and finishing in the server is the designed
	// way through, not a warning: an operator reading WARN would look for
	// a fault. (Serving without a seal role is one, said at start.)
	for line := range strings.Lines(c.stderr.String()) {
		if strings.Contains(line, "WARN") && !strings.Contains(line, "seal role") {
			t.Errorf("a migration that went as designed logged a warning: %s", line)
		}
	}

	// The seam: a row of the new schema takes the offset after the old
	// log's last.
	c = startChild(t, root, "")
	expectOffset(t, c.ws, "trades", `{"id":9,"sym":"x","px":2.5}`, rows+1, "after the migration (a row of the new schema)")
}

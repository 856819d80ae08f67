package control

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/pkg/broker/supervise"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
)

// MigrateChildCommand is the hidden subcommand of `streamcast control` a
// migration worker runs, `streamcast control migrate-child`: it reads
// lifecycle.MigrateJobs from stdin and answers each on stdout
// (lifecycle.ServeMigrateJobs).
const MigrateChildCommand = "migrate-child"

// migrationWorker is the child process the online migrations' file work
// runs in, at the lowest CPU priority (docs/design.md §5). A migration
// creates, syncs and removes some 35 files, half of its CPU in the
// kernel, and on a busy 2-core box that work held the serving streams'
// threads in the run queue for 2–8 ms, the tail of a neighbour's acks.
// Lowered (nice 19, and SCHED_IDLE where the kernel lets serve watch it),
// it waits for them instead; a worker that gets no CPU at all is ended
// and its migration finished here (watchStarvation). In the server's own
// process a thread's priority cannot do that: a Go thread at low priority
// still holds one of the runtime's Ps, and the collector's work for the
// migration's garbage runs on the others.
//
// The process outlives one migration: starting one costs about 120 ms of
// CPU in package initialisers, twice a migration's own. It is started
// when a migration begins (before the stream's writes are fenced, so its
// start-up overlaps the fence and the drain), serves migrations one at a
// time (the controller's one worker runs them), and is ended after
// workerIdle without one, or when the controller closes.
type migrationWorker struct {
	exe, configFile, level string
	logger                 *log.Logger
	idle                   time.Duration // 0 means workerIdle

	mu     sync.Mutex
	forker *supervise.Forker // niced; made with the first process, closed with the worker
	proc   *workerProc       // nil while none runs
	timer  *time.Timer       // ends proc once it has been idle for workerIdle
	idles  int               // counts the timers armed, so a stale one ends nothing
}

// workerIdle is how long the worker process stays after its last
// migration: a run of migrations pays its start-up once, and an idle
// server holds no process for it.
const workerIdle = time.Minute

// workerStopDelay bounds how long a worker asked to stop may take before
// it is killed; a kill is a crash its recorded intent recovers from.
const workerStopDelay = 10 * time.Second

// workerProc is one run of the worker's process.
type workerProc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *os.File      // the read end of its stdout
	answers *bufio.Reader // over stdout
	stderr  *tailBuffer
	waited  chan struct{} // closed once cmd.Wait returned
	err     error         // cmd.Wait's, once waited is closed
	// ended is set before serve itself signals or kills the process (a
	// starved worker, a stop that took too long, the server stopping):
	// its exit status then says what serve did, not that it failed.
	ended atomic.Bool
}

// start makes sure the worker's process runs, so that its start-up
// overlaps what the migration does before its job is sent.
func (w *migrationWorker) start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if w.proc != nil {
		select {
		case <-w.proc.waited:
			w.endLocked() // it died idle: start another
		default:
			return nil
		}
	}
	if w.forker == nil {
		w.forker = supervise.NewLowPriorityForker()
	}
	p, err := startWorkerProc(w.forker, w.exe, w.configFile, w.level)
	if err != nil {
		return err
	}
	w.proc = p
	w.logger.Info("control: started the migration worker process", "pid", p.cmd.Process.Pid)
	return nil
}

// run sends job to the worker's process (start must have succeeded) and
// returns its answer. A process that gives no answer, or whose migration
// ctx cancelled, is ended; the next migration starts another.
func (w *migrationWorker) run(ctx context.Context, job lifecycle.MigrateJob) (*lifecycle.Migration, error) {
	w.mu.Lock()
	p := w.proc
	w.mu.Unlock()
	if p == nil {
		return nil, errors.New("the migration worker process is not running")
	}
	// The server stopping asks the child to stop as well: its migration
	// then ends at its next step, as it would in this process.
	stopChild := context.AfterFunc(ctx, func() { p.ended.Store(true); _ = p.cmd.Process.Signal(syscall.SIGTERM) })
	watch := watchStarvation(p)
	m, err := func() (*lifecycle.Migration, error) {
		if err := lifecycle.WriteJob(p.stdin, job); err != nil {
			return nil, err
		}
		return lifecycle.ReadMigrateJobAnswer(p.answers)
	}()
	starved := watch.stop()
	signalled := !stopChild()
	var je *lifecycle.JobError
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case starved != nil:
		w.endLocked()
		return nil, starved
	case err != nil && !errors.As(err, &je):
		w.endLocked()
		return nil, p.gaveNoAnswer(err)
	case signalled:
		w.endLocked()
	default:
		w.idles++
		armed := w.idles
		w.timer = time.AfterFunc(cmp.Or(w.idle, workerIdle), func() { w.endIdle(armed) })
	}
	return m, err
}

// errWorkerStarved is wrapped by run's error when the worker's process
// was ended for getting next to no CPU while it had a job: the caller
// finishes the migration in its own process, from the step the worker
// reached (its intent is in the stream's metadata).
var errWorkerStarved = errors.New("the migration worker process got no CPU")

// starveWindow is how often the worker's CPU is read while it has a job.
// It is starved when, over starveWindows windows in a row, it ran for
// less than a twentieth of each while its threads waited for a CPU at
// least half of it: at the lowest priority on a server whose CPUs never
// idle (supervise's SCHED_IDLE), where it would hold its stream's writes
// fenced for seconds (10 s for an idle stream's migration beside two busy
// loops on 2 cores, against 2.4 s at nice 19 alone). A worker waiting for
// the disk or the network waits for no CPU, and is never taken for
// starved; one that gets a CPU now and then finishes on its own, and a
// burst of the server's own work shorter than the windows ends no
// worker, whose migration would then be redone at the server's priority.
const (
	starveWindow  = 250 * time.Millisecond
	starveWindows = 2
)

// starved reports whether a worker that ran for ran and waited for a CPU
// for waited over one window is starved.
func starved(ran, waited, window time.Duration) bool {
	return ran < window/20 && waited >= window/2
}

// starvationWatch ends the worker's process if it starves during a job.
type starvationWatch struct {
	done    chan struct{} // closed by stop
	stopped chan struct{} // closed when the watching goroutine returned
	err     error         // set before stopped closes: the starvation, if any
}

// watchStarvation reads p's CPU every starveWindow until stop, and kills
// p once it has starved for starveWindows in a row, which ends the job's
// answer read. Where the kernel tells no CPU figures, it watches nothing.
func watchStarvation(p *workerProc) *starvationWatch {
	sw := &starvationWatch{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(sw.stopped)
		pid := p.cmd.Process.Pid
		ran0, waited0, ok := supervise.ProcessCPU(pid)
		if !ok {
			return
		}
		// The figures where the run of starved windows began.
		streak, streakRan, streakWaited := 0, ran0, waited0
		tick := time.NewTicker(starveWindow)
		defer tick.Stop()
		for {
			select {
			case <-sw.done:
				return
			case <-tick.C:
			}
			ran, waited, ok := supervise.ProcessCPU(pid)
			if !ok {
				return
			}
			if starved(ran-ran0, waited-waited0, starveWindow) {
				streak++
			} else {
				streak, streakRan, streakWaited = 0, ran, waited
			}
			if streak == starveWindows {
				sw.err = fmt.Errorf("%w: it ran %v in %v while it waited %v for one", errWorkerStarved,
					(ran - streakRan).Round(time.Microsecond), starveWindow*starveWindows, (waited - streakWaited).Round(time.Millisecond))
				p.ended.Store(true)
				_ = p.cmd.Process.Kill()
				return
			}
			ran0, waited0 = ran, waited
		}
	}()
	return sw
}

// stop ends the watch and returns its starvation error, if it ended the
// process.
func (sw *starvationWatch) stop() error {
	close(sw.done)
	<-sw.stopped
	return sw.err
}

// endIdle ends the process when it has stayed idle since the timer armed
// as the armed'th fired.
func (w *migrationWorker) endIdle(armed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer == nil || armed != w.idles {
		return // a migration began meanwhile, and perhaps ended
	}
	w.timer = nil
	w.endLocked()
}

// close ends the process, if one runs.
func (w *migrationWorker) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.endLocked()
	if w.forker != nil {
		w.forker.Close()
		w.forker = nil
	}
}

// endLocked ends w.proc: its stdin closes, which ends a process between
// migrations at once; one in a migration is killed after
// workerStopDelay. w.mu is held.
func (w *migrationWorker) endLocked() {
	p := w.proc
	if p == nil {
		return
	}
	w.proc = nil
	_ = p.stdin.Close()
	select {
	case <-p.waited:
	case <-time.After(workerStopDelay):
		p.ended.Store(true)
		_ = p.cmd.Process.Kill()
		<-p.waited
	}
	_ = p.stdout.Close()
	switch {
	case p.err != nil && p.ended.Load():
		w.logger.Debug("control: the migration worker process ended as serve asked", "err", p.err)
	case p.err != nil:
		w.logger.Warn("control: the migration worker process ended badly", "err", p.err, "stderr", lastLine(p.stderr.String()))
	}
}

// startWorkerProc starts exe as the migration worker through forker (at
// the lowest CPU priority), killed when the server is (Linux's
// parent-death signal) and in a process group of its own.
func startWorkerProc(forker *supervise.Forker, exe, configFile, level string) (*workerProc, error) {
	args := append([]string{"control"}, logstore.MaintainChildLine(MigrateChildCommand, configFile, level, "json")...)
	cmd := exec.Command(exe, args...)
	// Serve's environment, as it is: credentials reach children only this
	// way. Not logstore.ChildEnv: its GOGC=25 for the package initialisers
	// suits a child that stays small for days, and doubles the start-up's
	// CPU (120 → 250 ms).
	cmd.Env = os.Environ()
	p := &workerProc{cmd: cmd, stderr: &tailBuffer{max: 8 << 10}, waited: make(chan struct{})}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	// Not cmd.StdoutPipe: Wait, which runs from the start, would close it
	// under the read of an answer.
	var stdoutW *os.File
	if p.stdout, stdoutW, err = os.Pipe(); err != nil {
		return nil, err
	}
	cmd.Stdout = stdoutW
	cmd.SysProcAttr = supervise.ChildProcAttr()
	err = forker.Start(cmd)
	stdoutW.Close() // the child holds its own copy
	if err != nil {
		p.stdout.Close()
		return nil, fmt.Errorf("start the migration worker process %s: %w", exe, err)
	}
	p.answers = lifecycle.NewAnswerReader(p.stdout)
	go func() {
		p.err = cmd.Wait()
		close(p.waited)
	}()
	return p, nil
}

// gaveNoAnswer words a process that answered nothing: how it ended and
// the last of what it wrote to stderr.
func (p *workerProc) gaveNoAnswer(err error) error {
	msg := fmt.Sprintf("the migration worker process gave no answer (%v", err)
	if p.err != nil {
		msg += "; " + p.err.Error()
	}
	msg += ")"
	if last := lastLine(p.stderr.String()); last != "" {
		msg += ": it said " + last
	}
	return errors.New(msg)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

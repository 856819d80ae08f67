package supervise

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/internal/waitfor"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
)

// errStopping is spawn's answer once the supervisor is stopping.
var errStopping = errors.New("the supervisor is stopping")

// roleChild is one role's process, across restarts.
type roleChild struct {
	sup    *Group
	role   logstore.Role
	every  time.Duration
	logger *log.Logger // serve's, prefixed with the role

	// mu guards what follows. spawn holds it across the fork, so beginStop
	// (which sets stopping under it) never misses a process started at the
	// same moment: either spawn sees stopping and starts nothing, or stop
	// sees the new process in cur and stops it.
	mu       sync.Mutex
	cur      *proc // the latest process; nil before the first
	restarts int
	lastErr  string
	lastAt   time.Time // when lastErr happened: a restarted, healthy child still shows it, and the time says it is old
	stopping bool
	quit     chan struct{} // closed by beginStop: a supervise loop waiting to restart returns
}

// proc is one run of a child's process.
type proc struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time
	ready   chan struct{} // closed when it wrote "ready"
	flushed chan struct{} // a token per "flushed" line (extras dropped)
	answers chan string   // its answers on readyFD to requests on add: "added N" or "refused N why" (extras dropped)
	add     *os.File      // serve's end of its add pipe (addFD), nil for replicate; closed once it exited
	exited  chan struct{} // closed once it exited and its pipes are drained; err is set then
	err     error         // how it exited (nil: status 0)

	mu   sync.Mutex
	last string // its last line of output
}

func (p *proc) isReady() bool { return isClosed(p.ready) }
func (p *proc) isDone() bool  { return isClosed(p.exited) }

func (p *proc) lastLine() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// readyFD is the descriptor a child reports on: its first ExtraFiles entry.
// addFD, the second, is the one serve hands it more logs on (Group.Add).
const (
	readyFD = 3
	addFD   = 4
)

// args is the child's command line: no secret ever goes here. It is
// rendered by logstore.MaintainCommandLine, from the same names `streamcast
// maintain` and the root command parse it with. Children log JSON, which
// the supervisor reads back into serve's log.
func (c *roleChild) args() []string {
	s := c.sup
	if c.role == RoleReplicate {
		a := s.Replicate
		a.Logs, a.ReadyFD = c.logs(), readyFD
		return append(logstore.MaintainChildLine(replica.Command, s.configFile, s.level, "json"), a.Args()...)
	}
	role := logstore.MaintainArgs{
		Role:       c.role,
		Every:      c.every,
		FlushEvery: s.flushEvery,
		Logs:       c.logs(),
		CacheLogs:  c.cacheLogs(),
		Override:   s.Overrides,
		MaxOpen:    s.MaxOpenLogs,
		ReadyFD:    readyFD,
		AddFD:      addFD,
	}
	return logstore.MaintainCommandLine(s.configFile, s.level, "json", role)
}

// logs are the logs c's role runs over: every served log, and for the
// retain role the retired streams' logs too.
func (c *roleChild) logs() []string {
	switch c.role {
	case logstore.RoleRetain:
		return c.sup.AllLogs()
	case RoleReplicate:
		return c.sup.ReplicateLogs
	}
	return c.sup.Logs()
}

// cacheLogs are the cache logs c's role runs over: all of them for the
// roles that keep a cache, none for those that publish.
func (c *roleChild) cacheLogs() []string {
	if !logstore.CacheRole(c.role) {
		return nil
	}
	return c.sup.CacheLogs
}

// spawn starts a process for c, unless c is stopping.
func (c *roleChild) spawn() (*proc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return nil, errStopping
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	sigR, sigW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := exec.Command(c.sup.exe, c.args()...)
	cmd.Env = logstore.ChildEnv(os.Environ()) // serve's, with the child's runtime settings
	cmd.Stdout, cmd.Stderr = outW, outW
	cmd.ExtraFiles = []*os.File{sigW} // descriptor 3 (readyFD)
	var addR, addW *os.File           // the add pipe: replicate takes no logs as it runs
	if c.role != RoleReplicate {
		if addR, addW, err = os.Pipe(); err != nil {
			outR.Close()
			outW.Close()
			sigR.Close()
			sigW.Close()
			return nil, err
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, addR) // descriptor 4 (addFD)
	}
	cmd.SysProcAttr = ChildProcAttr()
	err = c.sup.forker.Start(cmd)
	outW.Close() // the child holds its own copies now
	sigW.Close()
	if addR != nil {
		addR.Close()
	}
	if err != nil {
		outR.Close()
		sigR.Close()
		if addW != nil {
			addW.Close()
		}
		return nil, err
	}
	p := &proc{
		cmd:     cmd,
		pid:     cmd.Process.Pid,
		started: time.Now(),
		ready:   make(chan struct{}),
		flushed: make(chan struct{}, 4),
		answers: make(chan string, 4),
		add:     addW,
		exited:  make(chan struct{}),
	}
	c.cur = p
	c.sup.wg.Add(1)
	go c.watch(p, outR, sigR)
	c.logger.Debug("started", "pid", p.pid, "args", cmd.Args[1:])
	return p, nil
}

// watch reads a process's pipes and waits for it to exit.
func (c *roleChild) watch(p *proc, out, sig *os.File) {
	defer c.sup.wg.Done()
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		c.readOutput(p, out)
	}()
	go func() {
		defer readers.Done()
		c.readSignals(p, sig)
	}()
	err := p.cmd.Wait()
	// The pipes end with the process, unless something it started holds
	// them open; never wait for that for long.
	if !waitfor.Group(&readers, pipeDrainWait) {
		out.Close()
		sig.Close()
		readers.Wait()
	}
	out.Close()
	sig.Close()
	if p.add != nil {
		p.add.Close()
	}
	p.err = err
	close(p.exited)
}

// readSignals follows the child's reports: "ready", then "flushed" after
// each pass a SIGUSR1 asked for, and "added N" or "refused N why" for each
// request on its add pipe (roleChild.add).
func (c *roleChild) readSignals(p *proc, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		switch line := string(bytes.TrimSpace(sc.Bytes())); {
		case line == "ready":
			if !p.isReady() {
				close(p.ready)
				c.logger.Debug("ready", "pid", p.pid)
			}
		case line == "flushed":
			select {
			case p.flushed <- struct{}{}:
			default:
			}
		case strings.HasPrefix(line, "added ") || strings.HasPrefix(line, "refused "):
			select {
			case p.answers <- line:
			default: // four unread: answers to requests that timed out
			}
		}
	}
}

// readOutput re-logs every line the child writes, at the level it logged
// it (JSON lines from its logger); any other line (a usage error, a panic)
// is logged as a warning. Long lines are cut, never left unread: a child
// blocked on a full pipe would stall.
func (c *roleChild) readOutput(p *proc, r io.Reader) {
	br := bufio.NewReaderSize(r, 4096)
	var line []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(line) < maxOutputLine {
			line = append(line, chunk[:min(len(chunk), maxOutputLine-len(line))]...)
		}
		if err != nil {
			if len(line) > 0 {
				c.logLine(p, line)
			}
			return
		}
		if !isPrefix {
			c.logLine(p, line)
			line = line[:0]
		}
	}
}

func (c *roleChild) logLine(p *proc, line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	level, msg, kv, ok := parseLogLine(line, string(c.role))
	if !ok {
		level, msg, kv = log.WarnLevel, string(line), nil
	}
	level = min(level, log.ErrorLevel) // a child's fatal line is not serve's
	text := msg
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == "err" {
			text += ": " + fmt.Sprint(kv[i+1])
		}
	}
	p.mu.Lock()
	p.last = text
	p.mu.Unlock()
	if level >= log.ErrorLevel || !ok {
		c.setLastErr(text)
	}
	c.logger.Log(level, msg, append(kv, "pid", p.pid)...)
}

// parseLogLine reads a JSON line of charmbracelet/log: its level, message
// and the other keys in order (time and a role key equal to role are
// dropped: serve stamps and prefixes the line itself).
func parseLogLine(line []byte, role string) (level log.Level, msg string, kv []any, ok bool) {
	if line[0] != '{' {
		return 0, "", nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, "", nil, false
	}
	level = log.InfoLevel
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return 0, "", nil, false
		}
		key, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, "", nil, false
		}
		// A string is re-logged as the string; anything else (a number,
		// true, an array) as its JSON text, which serve's JSON logger
		// writes as it came, so a child's numbers stay numbers there.
		var val any = jsonValue(raw)
		var str string
		if json.Unmarshal(raw, &str) == nil {
			val = str
		}
		switch key {
		case "time", "prefix":
		case "level":
			if l, err := log.ParseLevel(str); err == nil {
				level = l
			}
		case "msg":
			msg = str
		case "role":
			if str != role {
				kv = append(kv, key, val)
			}
		default:
			kv = append(kv, key, val)
		}
	}
	return level, msg, kv, true
}

// jsonValue is a value of a child's log line that is no string, kept as
// the JSON text the child wrote. charmbracelet/log's JSON formatter
// writes it through MarshalJSON, as is (3, not "3"); its text formatter
// prints it through Format, as is. It must have no String method: that
// formatter quotes a fmt.Stringer's String().
type jsonValue json.RawMessage

// MarshalJSON returns the value's JSON text.
func (v jsonValue) MarshalJSON() ([]byte, error) { return v, nil }

// Format prints the value's JSON text, whatever the verb.
func (v jsonValue) Format(f fmt.State, _ rune) { _, _ = f.Write(v) }

func (c *roleChild) setLastErr(s string) {
	c.mu.Lock()
	c.lastErr, c.lastAt = s, time.Now()
	c.mu.Unlock()
}

func (c *roleChild) current() *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// add hands the running process dirs as request seq and waits up to wait
// for its answer. A process that is down, or exits before it answers,
// needs none: Group.Add extended the logs before calling add, and spawn
// renders a command line from them under mu, so the process that replaces
// it finds dirs there. A process spawned between that extension and the
// send has them already and takes the request as a no-op.
func (c *roleChild) add(ctx context.Context, seq int64, dirs []string, wait time.Duration) error {
	line, err := json.Marshal(struct {
		Seq  int64    `json:"seq"`
		Logs []string `json:"logs"`
	}{seq, dirs})
	if err != nil {
		return err
	}
	c.mu.Lock()
	p, stopping := c.cur, c.stopping
	c.mu.Unlock()
	if p == nil || p.add == nil || p.isDone() || stopping {
		return nil
	}
	// Drop answers left by a request that timed out, so the one awaited
	// answers this request.
drain:
	for {
		select {
		case <-p.answers:
		default:
			break drain
		}
	}
	deadline := time.Now().Add(wait)
	// Not under mu: a child that stopped reading (stopped, or wedged)
	// would otherwise hold up /stats and Halt for as long as the write
	// blocks. The deadline bounds it.
	_ = p.add.SetWriteDeadline(deadline)
	if _, err := p.add.Write(append(line, '\n')); err != nil {
		// A broken pipe is a process that has exited or is exiting: its
		// replacement finds dirs on its command line.
		select {
		case <-p.exited:
			return nil
		case <-time.After(min(time.Until(deadline), pipeDrainWait)):
		}
		return fmt.Errorf("send %d new logs to pid %d: %w", len(dirs), p.pid, err)
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	want, refused := fmt.Sprintf("added %d", seq), fmt.Sprintf("refused %d ", seq)
	for {
		select {
		case ans := <-p.answers:
			switch {
			case ans == want:
				return nil
			case strings.HasPrefix(ans, refused):
				return fmt.Errorf("pid %d refused %d new logs: %s", p.pid, len(dirs), strings.TrimPrefix(ans, refused))
			}
			// An answer to an earlier request that timed out: read on.
		case <-p.exited:
			return nil
		case <-timer.C:
			return fmt.Errorf("pid %d did not answer within %s whether it took %d new logs", p.pid, wait, len(dirs))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// beginStop ends restarts: from now on spawn starts nothing, and a
// supervise loop returns once its process is gone.
func (c *roleChild) beginStop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopping {
		c.stopping = true
		close(c.quit)
	}
}

func (c *roleChild) isStopping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopping
}

// supervise restarts c's process whenever it exits, until c stops: after
// 100 ms, doubling to 30 s, and from 100 ms again once a process stayed up
// 60 s.
func (c *roleChild) supervise(p *proc) {
	defer c.sup.wg.Done()
	delay := restartMin
	for {
		<-p.exited
		if c.isStopping() {
			return
		}
		up := time.Since(p.started)
		if up >= restartReset {
			delay = restartMin
		}
		status := exitStatus(p.err)
		last := p.lastLine()
		c.setLastErr(fmt.Sprintf("%s after %s; last output: %s", status, up.Round(time.Millisecond), quoteLine(last)))
		c.logger.Warn("maintenance child exited; restarting it", "pid", p.pid, "status", status,
			"up", up.Round(time.Millisecond), "restart_in", delay, "last_output", last)
		t := time.NewTimer(delay)
		select {
		case <-c.quit:
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, restartMax)
		np, err := c.spawn()
		if errors.Is(err, errStopping) {
			return
		}
		c.mu.Lock()
		c.restarts++
		c.mu.Unlock()
		if err != nil {
			// Counts as an exit at once: the next try waits longer.
			c.logger.Error("cannot restart the maintenance child", "err", err)
			np = &proc{started: time.Now(), err: err, exited: make(chan struct{})}
			close(np.exited)
		} else {
			c.logger.Info("restarted", "pid", np.pid, "restarts", c.restartCount())
		}
		p = np
	}
}

func (c *roleChild) restartCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restarts
}

// flush asks the running, ready process for a flushing pass (SIGUSR1) and
// waits up to wait for it to report the pass done. false: no process, not
// ready (a SIGUSR1 before maintain handles it would kill it), it exited, or
// it did not answer in time.
func (c *roleChild) flush(wait time.Duration) bool {
	p := c.current()
	if p == nil || p.cmd == nil || !p.isReady() || p.isDone() {
		return false
	}
drain: // drop stale reports, so the one awaited answers this signal
	for {
		select {
		case <-p.flushed:
		default:
			break drain
		}
	}
	if err := signalFlush(p.cmd.Process); err != nil {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-p.flushed:
		return true
	case <-p.exited:
		return false
	case <-t.C:
		return false
	}
}

// terminate stops the current process: SIGTERM (maintain finishes the pass
// it is in and exits), then SIGKILL after wait.
func (c *roleChild) terminate(wait time.Duration) {
	p := c.current()
	if p == nil || p.cmd == nil || p.isDone() {
		return
	}
	_ = signalStop(p.cmd.Process)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		c.logger.Warn("did not stop in time; killing it", "pid", p.pid, "waited", wait)
		killProcess(p)
		<-p.exited
	}
	if p.err != nil {
		c.logger.Debug("stopped", "pid", p.pid, "status", exitStatus(p.err))
	}
}

// exitStatus says how a process ended.
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func quoteLine(s string) string {
	if s == "" {
		return "(none)"
	}
	return fmt.Sprintf("%q", s)
}

// Forker starts child processes from one goroutine locked to its OS thread
// for its whole life. On Linux the parent-death signal fires when the
// thread that forked the child exits, not the process: a child forked from
// an ordinary goroutine could be killed whenever the runtime retires that
// thread. This thread exits only when Close ends the loop, after every
// child is gone. A Group has its own; tests that fork helper servers (an
// S3 server that must outlive every Group) make another.
//
// A low-priority Forker (NewLowPriorityForker) starts its children at the
// lowest CPU priority, so the kernel schedules serve's own threads first.
type Forker struct {
	reqs chan forkReq
	done chan struct{}
	low  bool
}

type forkReq struct {
	cmd *exec.Cmd
	err chan error
}

// NewForker starts the forking goroutine; Close stops it.
func NewForker() *Forker {
	f := &Forker{reqs: make(chan forkReq), done: make(chan struct{})}
	go f.loop()
	return f
}

// NewLowPriorityForker is NewForker for children that run at the lowest
// CPU priority (nice 19, and SCHED_IDLE on Linux), every thread of them
// from their first instruction where the system allows it
// (lowerForkingThread).
func NewLowPriorityForker() *Forker {
	f := &Forker{reqs: make(chan forkReq), done: make(chan struct{}), low: true}
	go f.loop()
	return f
}

func (f *Forker) loop() {
	defer close(f.done)
	// Never unlocked: the thread ends with the goroutine (and, lowered,
	// could not be raised again without privilege).
	runtime.LockOSThread()
	if f.low {
		lowerForkingThread()
	}
	for r := range f.reqs {
		err := r.cmd.Start()
		if err == nil && f.low {
			lowerChild(r.cmd.Process.Pid)
		}
		r.err <- err
	}
}

// Start runs cmd.Start on the forking thread.
func (f *Forker) Start(cmd *exec.Cmd) error {
	r := forkReq{cmd: cmd, err: make(chan error, 1)}
	f.reqs <- r
	return <-r.err
}

// Close ends the forking goroutine and its thread.
func (f *Forker) Close() {
	close(f.reqs)
	<-f.done
}

package supervise

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
)

// How serve treats its maintenance children (docs/design.md §5).
const (
	// DefaultReadyTimeout bounds start-up: serve fails when a child has
	// not reported ready by then.
	DefaultReadyTimeout = 30 * time.Second

	restartMin   = 100 * time.Millisecond // first pause before restarting a child that exited
	restartMax   = 30 * time.Second       // the pause doubles up to this
	restartReset = 60 * time.Second       // a child up this long starts again from restartMin

	pipeDrainWait = time.Second // after a child exits: how long its pipes may stay open
	maxOutputLine = 16 << 10    // longer output lines are cut
)

// StopWaits are the time budgets of a graceful stop.
type StopWaits struct {
	SealFlush time.Duration // how long the seal child may take to report its flush
	ChildStop time.Duration // SIGTERM, then this long before SIGKILL
	FinalSeal time.Duration // serve's own flushing seal, per log
	Publish   time.Duration // publish's whole flush: the child's half, then serve's own
}

// DefaultStopWaits returns the budgets serve stops its children with.
func DefaultStopWaits() StopWaits {
	return StopWaits{
		SealFlush: 5 * time.Second,
		ChildStop: 5 * time.Second,
		FinalSeal: 30 * time.Second,
		Publish:   20 * time.Second,
	}
}

// Schedule is one role a Group runs, with the pause between its passes.
type Schedule struct {
	Role  logstore.Role
	Every time.Duration
}

// Group runs serve's maintenance children: one `streamcast maintain
// --role R --log PATH…` process per configured role, over every durable log.
//
// Each child gets its own process group (so a terminal's Ctrl-C reaches
// serve alone) and, on Linux, SIGKILL as its parent-death signal (so a
// SIGKILL of serve leaves no orphan). It inherits serve's environment, the
// only way credentials reach it: nothing secret is ever on a command line,
// which anyone on the machine can read. Its stdout and stderr (JSON log
// lines) are re-logged through serve's logger, prefixed with the role.
//
// A child reports on the pipe at descriptor 3 (maintain --ready-fd 3):
// "ready" once it checked every log exists, "flushed" after each pass a SIGUSR1
// asked for. Start waits until every child is ready; afterwards a child
// that exits is restarted with capped exponential backoff. A child learns
// its logs from its command line, and logs added while it runs (Add) from
// the pipe at descriptor 4 (maintain --add-fd 4), answering on descriptor 3.
type Group struct {
	exe        string
	configFile string
	logs       []string // absolute log directories, in config order
	flushEvery time.Duration
	// Overrides are the config's tiers, as policy overrides, for logs
	// created before it changed; set them before Start.
	Overrides logstore.Override
	// RetiredLogs are logs only the retain role runs over: a retired
	// stream's log is fenced and published whole, so seal, compact,
	// publish and clean have no work there, but its retention window
	// still applies (docs/design.md §4.8). Set them before Start; Add
	// extends them after, so read them through AllLogs then.
	RetiredLogs []string
	// CacheLogs are logs kept as caches of another server's stream (a
	// relay's, docs/design.md §4.1): the seal, compact and clean roles
	// run over them (clean by retention alone), publish and the published
	// table's roles never do. Stop neither seals nor publishes them. Set
	// them before Start.
	CacheLogs []string
	// ReplicateLogs are the logs a `streamcast replicate` child ships
	// (the streams with replicate: true); none, no such child. Replicate
	// is its cadence (its Logs and ReadyFD are the group's to fill). Set
	// them before Start.
	ReplicateLogs []string
	Replicate     replica.Args
	// MaxOpenLogs bounds the logs each child holds open at once
	// (logstore.MaintainArgs.MaxOpen); 0 is the child's default. Set it before
	// Start.
	MaxOpenLogs int

	level        string // the children's --log-level
	logger       *log.Logger
	readyTimeout time.Duration
	waits        StopWaits
	addWait      time.Duration // how long Add waits for each child's answer

	forker   *Forker
	children []*roleChild
	wg       sync.WaitGroup // supervise loops and process watchers

	// logsMu guards logs and RetiredLogs once Start ran: Add extends them
	// while a supervise loop may be respawning a child, which must find
	// the new logs on its command line. Each extension makes new slices,
	// so a slice read under it never changes after.
	logsMu sync.Mutex
	// partial is set when Start left out a role that had no log to run
	// over: that role has no child to hand a live log to, so adding one
	// needs a new Group.
	partial bool
	addSeq  int64 // numbers Add's requests, which its caller serialises
}

// RoleReplicate names the replicate child among the maintenance roles:
// it is supervised, restarted and reported in /stats as they are.
const RoleReplicate logstore.Role = replica.Command

// New plans one child per role over logs; nothing starts until
// Start.
func New(exe, configFile string, roles []Schedule, logs []string, flushEvery, readyTimeout time.Duration, logger *log.Logger) *Group {
	level := logger.GetLevel()
	if level > log.ErrorLevel {
		level = log.ErrorLevel
	}
	s := &Group{
		exe:          exe,
		configFile:   configFile,
		logs:         logs,
		flushEvery:   flushEvery,
		level:        level.String(),
		logger:       logger,
		readyTimeout: readyTimeout,
		waits:        DefaultStopWaits(),
		addWait:      addWait,
	}
	for _, r := range roles {
		s.children = append(s.children, &roleChild{
			sup:    s,
			role:   r.Role,
			every:  r.Every,
			logger: logger.WithPrefix("maintain " + string(r.Role)),
			quit:   make(chan struct{}),
		})
	}
	return s
}

// Start starts every child and waits until each reported ready. A child
// that exits first, or is not ready within readyTimeout, fails start-up
// (its error names the role, the pid and the child's last line of output);
// so does ctx ending. On failure every child started is killed before
// Start returns.
func (s *Group) Start(ctx context.Context) error {
	s.forker = NewForker()
	if len(s.ReplicateLogs) > 0 {
		s.children = append(s.children, &roleChild{
			sup:    s,
			role:   RoleReplicate,
			every:  s.Replicate.SyncInterval,
			logger: s.logger.WithPrefix(replica.Command),
			quit:   make(chan struct{}),
		})
	}
	// A role with no log to run over has no child (every stream retired
	// leaves only retain's).
	planned := len(s.children)
	s.children = slices.DeleteFunc(s.children, func(c *roleChild) bool { return len(c.logs())+len(c.cacheLogs()) == 0 })
	s.partial = len(s.children) < planned
	first := make([]*proc, len(s.children))
	for i, c := range s.children {
		p, err := c.spawn()
		if err != nil {
			s.abort()
			return fmt.Errorf("start the maintenance child for role %s: %w", c.role, err)
		}
		first[i] = p
	}
	deadline := time.NewTimer(s.readyTimeout)
	defer deadline.Stop()
	for i, c := range s.children {
		p := first[i]
		select {
		case <-p.ready:
			continue
		case <-p.exited:
			s.abort()
			return fmt.Errorf("the maintenance child for role %s (pid %d) exited before it was ready: %s; its last output: %s",
				c.role, p.pid, exitStatus(p.err), quoteLine(p.lastLine()))
		case <-deadline.C:
			var slow []string
			for j, o := range s.children[i:] {
				q := first[i+j]
				if !q.isReady() {
					slow = append(slow, fmt.Sprintf("role %s (pid %d), last output: %s", o.role, q.pid, quoteLine(q.lastLine())))
				}
			}
			s.abort()
			return fmt.Errorf("maintenance children not ready after %s: %s; a child is ready once it has checked that every log exists and can be read",
				s.readyTimeout, strings.Join(slow, "; "))
		case <-ctx.Done():
			s.abort()
			return ctx.Err()
		}
	}
	for i, c := range s.children {
		s.wg.Add(1)
		go c.supervise(first[i])
	}
	s.logger.Info("maintenance children ready", "roles", len(s.children), "logs", len(s.logs))
	return nil
}

// abort kills every child at once and waits for them: start-up failed.
func (s *Group) abort() {
	for _, c := range s.children {
		c.beginStop()
		if p := c.current(); p != nil && !p.isDone() {
			killProcess(p)
		}
	}
	s.wg.Wait()
	s.forker.Close()
}

// Stop ends every child in the order that leaves each acknowledged row
// sealed and published; serve's writes are already fenced and its
// committers drained, so the logs' ends no longer move.
//
//  1. seal: SIGUSR1, and wait (up to 5 s) for the child to report the
//     flushing pass done; then SIGTERM (it finishes its pass) and SIGKILL
//     after 5 s. Then serve seals each log itself with flush, through its
//     writer handle: a no-op when the child's flush worked, the rest of
//     the work when it failed, was cut short or the child was down. When
//     Seal returns nil every committed row is in a file.
//  2. publish, within 20 s: for the first half, SIGUSR1 until each log's
//     published_through reaches its end (a flushing publish pushes every
//     file); then SIGTERM (SIGKILL after at most 5 s) and, if a table still
//     lags, serve publishes with flush itself for what is left of the 20 s.
//     Rows still unpublished are logged with the numbers; they are safe in
//     the log and publish after the next start.
//  3. every other child: SIGTERM, then SIGKILL after 5 s each, together.
//
// With flush_every 0 there is no flushing, at a stop as on a schedule:
// the children are only stopped. A role serve does not run is left alone.
func (s *Group) Stop(logs []*logstore.Log) {
	for _, c := range s.children {
		c.beginStop()
	}
	w := s.waits
	flush := s.flushEvery > 0
	if seal := s.child(logstore.RoleSeal); seal != nil {
		if flush && !seal.flush(w.SealFlush) {
			seal.logger.Warn("the seal child did not report a flush; serve seals what is left itself")
		}
		seal.terminate(w.ChildStop)
		if flush {
			s.finalSeal(logs)
		}
	}
	if pub := s.child(logstore.RolePublish); pub != nil {
		start := time.Now()
		done := !flush || s.flushPublish(pub, logs, start.Add(w.Publish/2))
		if !done {
			pub.logger.Warn("the publish child did not publish every row; serve publishes what is left itself")
		}
		pub.terminate(min(w.ChildStop, max(time.Until(start.Add(w.Publish)), 100*time.Millisecond)))
		if !done {
			s.finalPublish(logs, start.Add(w.Publish))
		}
	}
	var others sync.WaitGroup
	for _, c := range s.children {
		if c.role == logstore.RoleSeal || c.role == logstore.RolePublish {
			continue
		}
		others.Add(1)
		go func() {
			defer others.Done()
			c.terminate(w.ChildStop)
		}()
	}
	others.Wait()
	s.wg.Wait()
	s.forker.Close()
	s.logger.Info("maintenance children stopped")
}

// Halt stops every child without flushing, all at once: SIGTERM (each
// finishes the pass it is in), then SIGKILL after the stop wait. serve
// halts its children to start them again over another set of logs.
func (s *Group) Halt() {
	var wg sync.WaitGroup
	for _, c := range s.children {
		c.beginStop()
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.terminate(s.waits.ChildStop)
		}()
	}
	wg.Wait()
	s.wg.Wait()
	s.forker.Close()
	s.logger.Info("maintenance children stopped, to restart over another set of logs")
}

func (s *Group) child(role logstore.Role) *roleChild {
	for _, c := range s.children {
		if c.role == role {
			return c
		}
	}
	return nil
}

// finalSeal seals everything still buffered in each log, through serve's
// writer handle (Writer handles may Seal; seal.lock keeps it from racing
// any other sealer).
func (s *Group) finalSeal(logs []*logstore.Log) {
	for _, l := range logs {
		ctx, cancel := context.WithTimeout(context.Background(), s.waits.FinalSeal)
		n, err := retryBusy(ctx, func() (int64, error) { return l.Seal(ctx, true) })
		cancel()
		switch {
		case err != nil:
			s.logger.Error("final seal failed; the rows stay in the buffer, safe, and are sealed after the next start", "log", l.Dir(), "err", err)
		case n > 0:
			s.logger.Info("sealed at stop", "log", l.Dir(), "rows", n)
		}
	}
}

// flushPublish asks the publish child for flushing passes until every log
// is published to its end, or the deadline; it reports whether they are.
// A pass that answers but leaves a lag (S3 refusing, say) is retried after
// a pause, not in a tight loop.
func (s *Group) flushPublish(pub *roleChild, logs []*logstore.Log, deadline time.Time) bool {
	for attempt := 0; ; attempt++ {
		if publishedAll(logs) {
			return true
		}
		if attempt > 0 {
			time.Sleep(min(250*time.Millisecond, max(time.Until(deadline), 0)))
		}
		left := time.Until(deadline)
		if left <= 0 || !pub.flush(left) {
			return publishedAll(logs)
		}
	}
}

// finalPublish publishes with flush through serve's own handles what the
// publish child left, within the deadline, and logs what still lags.
func (s *Group) finalPublish(logs []*logstore.Log, deadline time.Time) {
	for _, l := range logs {
		if lag, ok := publishLag(l); ok && lag == 0 {
			continue
		}
		if time.Until(deadline) > 0 {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			n, err := retryBusy(ctx, func() (int64, error) { return l.Publish(ctx, true) })
			cancel()
			switch {
			case err != nil:
				s.logger.Error("final publish failed", "log", l.Dir(), "err", err)
			case n > 0:
				s.logger.Info("published at stop", "log", l.Dir(), "rows", n)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := l.Status(ctx)
		cancel()
		switch {
		case err != nil:
			s.logger.Error("cannot tell whether every row is published", "log", l.Dir(), "err", err)
		case st.PublishLagRows > 0:
			s.logger.Error("acknowledged rows are not published yet; they are safe in the log and publish after the next start",
				"log", l.Dir(), "unpublished_rows", st.PublishLagRows, "published_through", st.PublishedThrough, "end", st.End)
		}
	}
}

// publishedAll reports whether every log's published table holds every
// row the log committed.
func publishedAll(logs []*logstore.Log) bool {
	for _, l := range logs {
		if lag, ok := publishLag(l); !ok || lag > 0 {
			return false
		}
	}
	return true
}

func publishLag(l *logstore.Log) (int64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := l.Status(ctx)
	if err != nil {
		return 0, false
	}
	return st.PublishLagRows, true
}

// retryBusy runs step until it does not answer ErrBusy (another process
// holds the role lock: a child just killed releases it at once, a stray
// `streamcast maintain` after its pass) or ctx ends.
func retryBusy(ctx context.Context, step func() (int64, error)) (int64, error) {
	for {
		n, err := step()
		if !errors.Is(err, logstore.ErrBusy) {
			return n, err
		}
		select {
		case <-ctx.Done():
			return n, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// FlushLog seals and publishes everything a stopped stream's log holds,
// through serve's own writer handle, and reports the rows still
// unpublished (0 when every acknowledged row is in the published table). A
// maintenance child that holds a role lock is waited for (retryBusy).
func FlushLog(l *logstore.Log, waits StopWaits) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waits.FinalSeal)
	_, err := retryBusy(ctx, func() (int64, error) { return l.Seal(ctx, true) })
	cancel()
	if err != nil {
		return -1, err
	}
	ctx, cancel = context.WithTimeout(context.Background(), waits.Publish)
	defer cancel()
	if _, err := retryBusy(ctx, func() (int64, error) { return l.Publish(ctx, true) }); err != nil {
		return -1, err
	}
	st, err := l.Status(ctx)
	if err != nil {
		return -1, err
	}
	return st.PublishLagRows, nil
}

// Logs are the log directories the children run over, in config order.
func (s *Group) Logs() []string {
	s.logsMu.Lock()
	defer s.logsMu.Unlock()
	return s.logs
}

// retired returns RetiredLogs as Add leaves them.
func (s *Group) retired() []string {
	s.logsMu.Lock()
	defer s.logsMu.Unlock()
	return s.RetiredLogs
}

// AllLogs returns the logs the retain child runs over: Logs, then
// RetiredLogs (never CacheLogs: a cache's retention is clean's).
func (s *Group) AllLogs() []string {
	s.logsMu.Lock()
	defer s.logsMu.Unlock()
	return slices.Concat(s.logs, s.RetiredLogs)
}

// addWait bounds how long Add waits for each child to answer: a child
// queues the logs as it reads them, so only a wedged one takes this long.
const addWait = 5 * time.Second

// Add hands the running children more logs, live (every role but
// replicate runs over them) and retired (only retain), without restarting
// any. The Group's lists are extended first, so a child (re)started from
// then on finds the logs on its command line; then each child running is
// sent them on its add pipe and answers once it has queued them for its
// loop, which steps them at once. A child that exits meanwhile needs no
// answer: its replacement has them. An error (a refusal, no answer within
// 5 s, a role with no child) leaves some children without the logs, and
// the caller must then replace the Group with one over every log. Logs to
// replicate and cache logs are never added this way.
func (s *Group) Add(ctx context.Context, live, retired []string) error {
	if s.partial && len(live) > 0 {
		return errors.New("a role had no log to run over when the children started, so it has no child to take a live log")
	}
	s.logsMu.Lock()
	s.logs = slices.Concat(s.logs, live)
	s.RetiredLogs = slices.Concat(s.RetiredLogs, retired)
	s.logsMu.Unlock()
	s.addSeq++
	for _, c := range s.children {
		var dirs []string
		switch c.role {
		case RoleReplicate:
			continue
		case logstore.RoleRetain:
			dirs = slices.Concat(live, retired)
		default:
			dirs = live
		}
		if len(dirs) == 0 {
			continue
		}
		if err := c.add(ctx, s.addSeq, dirs, s.addWait); err != nil {
			return fmt.Errorf("the %s child did not take the new logs: %w", c.role, err)
		}
	}
	s.logger.Info("maintenance children took the new logs; none restarted", "added", len(live)+len(retired), "logs", len(s.AllLogs()))
	return nil
}

// ChildStats are the facts /stats reports about one maintenance child
// (`streamcast maintain --role R` started by serve).
type ChildStats struct {
	Role      string  `json:"role"`
	PID       *int    `json:"pid"`        // null while it is down, waiting to be restarted
	Ready     bool    `json:"ready"`      // it checked every log and runs its passes
	Restarts  int     `json:"restarts"`   // restarts since serve started
	LastError *string `json:"last_error"` // the last error it logged, or how it last exited; null: none
	// LastErrorAt is when LastError happened (UTC); null with it. A
	// child that is ready again keeps its last error, so the time tells a
	// past failure from a current one.
	LastErrorAt *time.Time `json:"last_error_at"`
	EveryS      float64    `json:"every_s"` // its pause between passes
}

// Stats reports every child, in role order.
func (s *Group) Stats() []ChildStats {
	out := make([]ChildStats, 0, len(s.children))
	for _, c := range s.children {
		c.mu.Lock()
		cs := ChildStats{Role: string(c.role), EveryS: c.every.Seconds(), Restarts: c.restarts}
		if c.lastErr != "" {
			e, at := c.lastErr, c.lastAt.UTC().Truncate(time.Millisecond)
			cs.LastError, cs.LastErrorAt = &e, &at
		}
		if p := c.cur; p != nil && !p.isDone() {
			pid := p.pid
			cs.PID = &pid
			cs.Ready = p.isReady()
		}
		c.mu.Unlock()
		out = append(out, cs)
	}
	return out
}

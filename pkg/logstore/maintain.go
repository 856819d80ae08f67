package logstore

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/internal/exepages"
	"github.com/streamcast/streamcast/internal/ratelog"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// Defaults of the MaintainOptions left at zero.
const (
	// DefaultRepeatEvery is how often a failure that repeats every pass is
	// logged again, with its count.
	DefaultRepeatEvery = 30 * time.Second
)

// idleCheck is the longest a log found idle goes unchecked by a role
// whose passes come faster (seal's 250ms): each idle look doubles the
// wait from one pass up to this. A flush boundary, a forced pass or a
// clean deadline looks at every log at once, so the only work this can
// delay is sealing a full target, whose rows are durable in the buffer
// meanwhile.
const idleCheck = 2 * time.Second

// A pass that opened freeAfterOpens logs or more returns freed memory to
// the system, unless one did less than freeEvery ago; so does a pass that
// ends with no log open, at most once per freeIdleEvery.
const (
	freeAfterOpens = 16
	freeEvery      = 10 * time.Second
	freeIdleEvery  = 30 * time.Second
)

// A role whose passes are keepOpenBelow or more apart (clean-published,
// retain) closes every log at the end of a pass: a log held open until
// the next pass would pin its descriptors and page caches for nothing,
// and retain, which steps every log each pass, would keep MaxOpen of them
// open for good.
const keepOpenBelow = time.Minute

// MaintainOptions tunes Maintain.
type MaintainOptions struct {
	// Every is the pause between passes; it must be positive.
	Every time.Duration
	// FlushEvery makes seal and publish flush once per interval, at
	// wall-clock multiples of it (so every process agrees when, across
	// restarts): seal cuts everything buffered, and publish pushes every
	// file, on each pass until the table holds everything that was
	// committed at the boundary. 0 never flushes on a schedule.
	FlushEvery time.Duration
	// Flush, when it delivers, makes the next pass run at once, over every
	// log, and flush (compact too merges every run then); see Flushed.
	Flush <-chan struct{}
	// Flushed, when set, is called after each pass that Flush asked for.
	Flushed func()
	// Ready, when set, is called once, when Maintain has checked that every
	// log exists and can be read, before the first pass: a pass over
	// thousands of logs takes a while, and serve's start-up waits for
	// Ready with a bound (a log that fails later is retried, not fatal;
	// serve has opened every log itself by then).
	Ready func()
	// Override replaces the retention, grace and S3 settings stored in each
	// log's config where it sets them (non-zero fields only).
	Override Config
	// Passes stops the loop after this many passes; 0 runs until ctx ends.
	Passes int
	// MaxOpen bounds the logs held open at once; opening another closes
	// the one used longest ago. 0 is DefaultMaxOpen.
	MaxOpen int
	// RepeatEvery is how often a failure that repeats (one log, one step)
	// is logged again, with its count; 0 is DefaultRepeatEvery.
	RepeatEvery time.Duration
	// Retain is the retain role's step, called each pass with each log
	// (opened as a Maintainer, with the clock and overrides): the
	// retention pass of the stream the log is current in. It returns how
	// many rows and files it deleted. Required for RoleRetain, ignored
	// otherwise.
	Retain func(ctx context.Context, l *Log) (int64, error)
	// Cache lists the logs of dirs kept as caches of another server's
	// stream (a relay's, docs/design.md §4.1): nothing publishes them, so
	// the clean role drops their oldest files by retention alone
	// (Log.CleanCache), and only the roles CacheRole names run over
	// them; Maintain refuses them for any other.
	Cache []string
	// Additions, when set, hands the running loop more logs (a stream
	// serve started): each is stepped as soon as it is taken, during the
	// pause between passes, and is in every pass after.
	Additions *Additions
	// Logger receives a line per failure (repeats rate-limited) and per
	// pass that did work, each with the role; nil discards them.
	Logger *log.Logger
	// Clock tells the time, for the flush schedule, the due times of the
	// clean roles and every log the loop opens (grace and retention); nil
	// is the system clock. The pause between passes is a real timer
	// whatever the clock says.
	Clock Clock
}

// Maintain runs role over the logs in dirs, a pass over every log after
// another, until ctx ends (then it finishes the pass it is in) or Passes
// passes ran. A directory that holds no log when Maintain starts is an error
// (wrapping fs.ErrNotExist): a mistyped path would otherwise be retried
// forever. After that, a log that fails to open, or a step that fails, is
// logged and tried again on the next pass: one bad log or one bad moment
// (an unreachable S3, say) never stops the loop, and nothing is lost by a
// retry. A step another process holds the role lock for is skipped
// quietly.
//
// A pass costs little for a log with nothing to do: Maintain steps a log only
// when its buffer.db changed since its last step (logstore.Activity), a
// flush boundary finds changes it has not flushed, a clean deadline came
// due, or its last attempt failed; and it holds at most MaxOpen logs open.
func Maintain(ctx context.Context, role Role, dirs []string, opts MaintainOptions) error {
	if !knownRole(role) {
		return fmt.Errorf("unknown maintenance role %q; the roles are %s", role, strings.Join(RoleNames(), ", "))
	}
	if len(dirs) == 0 {
		return errors.New("no logs to maintain: give at least one log directory")
	}
	for _, dir := range dirs {
		// A log another process is opening just now is still a log.
		if _, err := ReadActivity(dir); err != nil && !errors.Is(err, ErrInFlux) {
			return fmt.Errorf("%w; give the directory of an existing log, <root>/<stream>/<log>: "+
				"serve creates one for each durable stream in its config", err)
		}
	}
	for _, dir := range opts.Cache {
		if !slices.Contains(dirs, dir) {
			return fmt.Errorf("cache log %s is not among the logs to maintain; give it as one of them too", dir)
		}
		if !CacheRole(role) {
			return fmt.Errorf("log %s is a cache of another server's stream and is never published: the %s role does not run over it", dir, role)
		}
	}
	if role == RoleRetain && opts.Retain == nil {
		return errors.New("the retain role needs the stream's retention pass, which this build did not give it")
	}
	if opts.Every <= 0 {
		return fmt.Errorf("the pause between passes is %s; it must be positive", opts.Every)
	}
	if opts.FlushEvery < 0 {
		return fmt.Errorf("the flush interval is %s; it must be positive, or 0 for never", opts.FlushEvery)
	}
	if opts.MaxOpen < 0 {
		return fmt.Errorf("at most %d open logs: give a positive number, or 0 for %d", opts.MaxOpen, DefaultMaxOpen)
	}
	r := newRunner(role, dirs, opts)
	defer r.closeAll()

	now := opts.Clock.Now
	// Only seal and publish flush: the other roles keep their own
	// cadence, so a flush boundary never wakes them (retain, whose pass
	// steps every log, would otherwise open all of them once a minute).
	flushes := opts.FlushEvery > 0 && (role == RoleSeal || role == RolePublish)
	var nextFlush time.Time
	if flushes {
		nextFlush = now().Truncate(opts.FlushEvery).Add(opts.FlushEvery)
	}
	if opts.Ready != nil {
		opts.Ready()
	}
	var added <-chan struct{}
	if opts.Additions != nil {
		added = opts.Additions.wake
	}
	forced := false
	for pass := 1; ; pass++ {
		t := now()
		flush := forced
		if flushes && !t.Before(nextFlush) {
			flush = true
			nextFlush = t.Truncate(opts.FlushEvery).Add(opts.FlushEvery)
		}
		// The pass ignores cancellation: a signal ends the loop after the
		// pass, never in the middle of a step.
		r.pass(context.WithoutCancel(ctx), flush, forced)
		if forced && opts.Flushed != nil {
			opts.Flushed()
		}
		forced = false
		if opts.Passes > 0 && pass >= opts.Passes {
			return nil
		}
		wait := opts.Every
		if flushes {
			if d := nextFlush.Sub(now()); d < wait {
				wait = max(d, 0)
			}
		}
		timer := time.NewTimer(wait)
	pause:
		for {
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil
			case <-timer.C:
				break pause
			case <-opts.Flush:
				timer.Stop()
				forced = true
				break pause
			case <-added:
				// Only the logs added are stepped now, and the pause goes
				// on: a whole pass per stream started would cost retain,
				// which steps every log each pass, an open of every log.
				if dirs := r.add(opts.Additions.take()); len(dirs) > 0 {
					r.passOver(context.WithoutCancel(ctx), dirs, false, false)
				}
			}
		}
	}
}

// Additions hands a running Maintain more logs to maintain (the logs of a
// stream serve started), so that Maintain need not be restarted over every log
// to learn one more. Add checks each log as Maintain checks its own at start
// and queues it; Maintain takes the queue during its pause between passes,
// steps those logs at once, and runs over them in every pass after. Safe
// for concurrent use.
type Additions struct {
	role Role
	wake chan struct{} // a token once something is queued; Maintain takes the queue on it

	mu    sync.Mutex // guards the queue
	logs  []string
	cache []string
}

// NewAdditions returns an empty queue for a Maintain of role.
func NewAdditions(role Role) *Additions {
	return &Additions{role: role, wake: make(chan struct{}, 1)}
}

// Add queues logs (and cache, logs kept as caches, as MaintainOptions.Cache) for
// the running Maintain. It refuses the whole request, queuing none of it, when
// a directory holds no log or a cache log is given to a role that never
// runs over one. A directory Maintain has already is taken as a no-op, so a
// request repeated, or one that crossed a restart that put the log on the
// command line, does no harm.
func (a *Additions) Add(logs, cache []string) error {
	if len(cache) > 0 && !CacheRole(a.role) {
		return fmt.Errorf("log %s is a cache of another server's stream and is never published: the %s role does not run over it", cache[0], a.role)
	}
	for _, dir := range slices.Concat(logs, cache) {
		// A log another process is opening just now is still a log.
		if _, err := ReadActivity(dir); err != nil && !errors.Is(err, ErrInFlux) {
			return fmt.Errorf("%w; give the directory of an existing log, <root>/<stream>/<log>", err)
		}
	}
	a.mu.Lock()
	a.logs = append(a.logs, logs...)
	a.cache = append(a.cache, cache...)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default: // one is pending already, and its take will see these too
	}
	return nil
}

// take empties the queue.
func (a *Additions) take() (logs, cache []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	logs, cache = a.logs, a.cache
	a.logs, a.cache = nil, nil
	return logs, cache
}

// runner is the state of one Maintain: the open logs and what it knows of each.
type runner struct {
	role     Role
	dirs     []string
	logger   *log.Logger
	failures *ratelog.Limiter
	override Config
	clock    Clock // every log's clock
	maxOpen  int
	every    time.Duration // the pause between passes
	// sealWait bounds how long a flushing publish pass waits for the seal
	// role's flush at the same boundary.
	sealWait time.Duration
	retain   func(ctx context.Context, l *Log) (int64, error) // RoleRetain's step
	cache    map[string]bool                                  // the logs kept as caches (MaintainOptions.Cache)

	// open holds the open logs, most recently used at the front; byDir
	// finds their elements.
	open  *list.List
	byDir map[string]*list.Element
	state map[string]*logState
	// opened counts the logs this pass opened; freed is when memory was
	// last given back, by free (debug.FreeOSMemory).
	opened int
	freed  time.Time
	free   func()
}

// openedLog is an element of runner.open.
type openedLog struct {
	dir string
	log *Log
}

// logState is what the runner knows of one log between passes.
type logState struct {
	// stepped is set once a step succeeded; seen is the log's Activity
	// read before it: a step sees every commit that seen covers, so an
	// unchanged Activity means the step would find what it found then.
	stepped bool
	seen    Activity
	// flushed is the Activity before the last flushing step that
	// succeeded: a flush boundary skips the log while it is unchanged,
	// since everything then committed was cut or pushed.
	flushedOnce bool
	flushed     Activity
	// due is when a clean step is due whatever the Activity says (a
	// queued deletion's grace ends, a retention runs out); zero for none.
	due time.Time
	// idle counts the looks in a row that found the log idle; nextCheck
	// is when the next look is due (real time).
	idle      int
	nextCheck time.Time
	// inFlux counts the looks in a row that found the log's WAL index
	// being rebuilt (logstore.ErrInFlux), at most maxInFlux.
	inFlux int
	// flushTo is, for publish, the end the published table must reach
	// before publish stops flushing: the log's end at the last flush
	// boundary; 0 when no flush is pending.
	flushTo int64
}

// maxInFlux bounds the passes in a row that skip a log because another
// process was opening it: past it, the log is looked at as if changed.
const maxInFlux = 3

func newRunner(role Role, dirs []string, opts MaintainOptions) *runner {
	logger := opts.Logger
	if logger == nil {
		logger = log.New(io.Discard)
	}
	// The role once, here: a caller's logger must not add it again.
	logger = logger.With("role", string(role))
	repeat := opts.RepeatEvery
	if repeat <= 0 {
		repeat = DefaultRepeatEvery
	}
	maxOpen := opts.MaxOpen
	if maxOpen == 0 {
		maxOpen = DefaultMaxOpen
	}
	r := &runner{role: role, dirs: dirs, logger: logger, override: opts.Override, clock: opts.Clock, maxOpen: maxOpen, every: opts.Every,
		sealWait: min(opts.Every, 2*time.Second), retain: opts.Retain, open: list.New(), byDir: map[string]*list.Element{}, state: map[string]*logState{}, free: freeMemory}
	// charmbracelet's Logger is a slog.Handler, so the limiter's lines go
	// out through the same logger, role and format included.
	r.failures = ratelog.New(slog.New(logger), repeat, time.Now)
	for _, dir := range dirs {
		r.state[dir] = &logState{}
	}
	r.cache = map[string]bool{}
	for _, dir := range opts.Cache {
		r.cache[dir] = true
	}
	return r
}

// add makes logs and cache part of every pass from now on and returns
// the directories it did not have. One it has already keeps what it was
// (live or cache) and what is known of it.
func (r *runner) add(logs, cache []string) []string {
	var fresh []string
	for i, dir := range slices.Concat(logs, cache) {
		if _, ok := r.state[dir]; ok {
			continue
		}
		if i >= len(logs) {
			r.cache[dir] = true
		}
		r.state[dir] = &logState{}
		fresh = append(fresh, dir)
		r.logger.Debug("log added", "log", dir)
	}
	// A new slice: r.dirs may share its array with the caller's dirs.
	r.dirs = slices.Concat(r.dirs, fresh)
	return fresh
}

// pass runs the role's step once over every log that has work.
func (r *runner) pass(ctx context.Context, flush, forced bool) {
	r.passOver(ctx, r.dirs, flush, forced)
}

// passOver is pass over dirs only (the logs just added).
func (r *runner) passOver(ctx context.Context, dirs []string, flush, forced bool) {
	r.opened = 0
	for _, dir := range dirs {
		r.visit(ctx, dir, flush, forced)
	}
	if r.every >= keepOpenBelow {
		r.closeAll()
	}
	// Opening many logs leaves megabytes of freed heap (page caches,
	// schemas) that the runtime would give back only slowly; an idle
	// process should hold little, so give it back now, at most once per
	// freeEvery.
	//
	// An idle process keeps allocating a little (each look at a log), and
	// the runtime keeps as much freed heap as its collection goal, twice
	// the live heap, allows: with no log open, nothing needs that
	// headroom, so give it back too, less often (a collection of an idle
	// child's heap costs a few milliseconds).
	since := time.Since(r.freed)
	if (r.opened >= freeAfterOpens && since >= freeEvery) || (r.open.Len() == 0 && since >= freeIdleEvery) {
		r.free()
		r.freed = time.Now()
	}
}

// freeMemory gives back the heap the runtime holds free and this
// process's mappings of the binary's read-only pages (internal/exepages):
// an idle child needs a few MB of the 50 MB of code and tables its start
// and its first pass touched.
func freeMemory() {
	debug.FreeOSMemory()
	_ = exepages.Release() // it only ever lowers the resident set; a failure costs nothing
}

// visit steps one log when it has work.
func (r *runner) visit(ctx context.Context, dir string, flush, forced bool) {
	st := r.state[dir]
	// Only seal and publish flush; the other roles ignore the schedule.
	flush = flush && r.flushes()
	// The retain step is due every pass (its cadence is Every): its work
	// comes from the clock and the stream's metadata, which no Activity of
	// the log shows.
	due := r.role == RoleRetain || (!st.due.IsZero() && !r.clock.Now().Before(st.due))
	quiet := func() bool { return !forced && !flush && !due && st.flushTo == 0 && st.stepped }
	if quiet() && time.Now().Before(st.nextCheck) {
		return // idle at the last look; see idleCheck
	}
	act, err := ReadActivity(dir)
	if errors.Is(err, ErrInFlux) {
		// Another process is opening the log this instant, which is no
		// commit. Taking it for one would open the log here, and, with
		// every role doing so, each open would set the next one off:
		// look again next pass, a few times at most.
		if quiet() && st.inFlux < maxInFlux {
			st.inFlux++
			return
		}
		err = nil // act is then the files' stamps: the log looks changed
	}
	st.inFlux = 0
	if err != nil {
		r.failures.Error(ctx, "open "+dir, "cannot read log; retrying next pass", "log", dir, "err", err)
		return
	}
	// A flush cuts or pushes what was committed before it: a log with no
	// commit since its last flush has nothing more to flush.
	flush = flush && (!st.flushedOnce || act != st.flushed)
	if quiet() && act == st.seen {
		// Nothing committed since the last step, nothing due: the log is
		// idle, and an idle log holds no files or SQLite connections
		// (their page caches would cost megabytes a log).
		r.drop(dir)
		if r.every < idleCheck {
			st.idle = min(st.idle+1, 16)
			st.nextCheck = time.Now().Add(min(r.every<<st.idle, idleCheck))
		}
		return
	}
	st.idle, st.nextCheck = 0, time.Time{}
	l, err := r.get(dir)
	if err != nil {
		r.failures.Error(ctx, "open "+dir, "cannot open log; retrying next pass", "log", dir, "err", err)
		return
	}
	r.failures.Recovered(ctx, "open "+dir, "log opens again", "log", dir)
	if r.step(ctx, l, st, flush, forced) {
		st.stepped, st.seen = true, act
		if flush || (!st.flushedOnce && r.flushes() && r.published(ctx, l)) {
			st.flushedOnce, st.flushed = true, act
		}
	} else {
		st.stepped = false // try again next pass
	}
}

// flushes reports whether the role acts on flush boundaries.
func (r *runner) flushes() bool { return r.role == RoleSeal || r.role == RolePublish }

// published reports whether the published table holds every row l's
// buffer had when its Activity was read before the step just taken: a
// flush would then find nothing to cut or push. Without it, the first
// flush boundary after a start opens every log, idle or not.
func (r *runner) published(ctx context.Context, l *Log) bool {
	st, err := l.Status(ctx)
	return err == nil && st.PublishLagRows == 0
}

// get returns the open log of dir, opening it (and closing the one used
// longest ago, past MaxOpen) when it is not open.
func (r *runner) get(dir string) (*Log, error) {
	if e, ok := r.byDir[dir]; ok {
		r.open.MoveToFront(e)
		return e.Value.(*openedLog).log, nil
	}
	l, err := Open(dir, Maintainer, WithClock(r.clock), WithOverride(r.override))
	if err != nil {
		return nil, err
	}
	for r.open.Len() >= r.maxOpen {
		r.drop(r.open.Back().Value.(*openedLog).dir)
	}
	r.byDir[dir] = r.open.PushFront(&openedLog{dir: dir, log: l})
	r.opened++
	return l, nil
}

// drop closes the log of dir if it is open.
func (r *runner) drop(dir string) {
	e, ok := r.byDir[dir]
	if !ok {
		return
	}
	r.open.Remove(e)
	delete(r.byDir, dir)
	if err := e.Value.(*openedLog).log.Close(); err != nil {
		r.logger.Warn("close log", "log", dir, "err", err)
	}
}

func (r *runner) closeAll() {
	for r.open.Len() > 0 {
		r.drop(r.open.Front().Value.(*openedLog).dir)
	}
}

// step runs the role on one log and reports whether it succeeded (a step
// another process holds the lock for did not).
func (r *runner) step(ctx context.Context, l *Log, st *logState, flush, forced bool) (ok bool) {
	dir := l.Dir()
	defer func() {
		// A step must never take the loop down; report and go on.
		if p := recover(); p != nil {
			r.failures.Error(ctx, "step "+dir, "maintenance step crashed; retrying next pass", "log", dir, "panic", p)
			r.drop(dir)
			ok = false
		}
	}()
	start := time.Now() // a stopwatch, not the clock: how long the step took
	var n int64
	var cleaned Cleaned
	var err error
	switch r.role {
	case RoleSeal:
		n, err = l.Seal(ctx, flush)
	case RoleCompact:
		n, err = l.Compact(ctx, forced)
	case RolePublish:
		flush, err = r.publishFlush(ctx, l, st, flush)
		if err == nil {
			n, err = l.Publish(ctx, flush)
		}
	case RoleClean:
		if r.cache[dir] {
			cleaned, err = l.CleanCache(ctx)
		} else {
			cleaned, err = l.Clean(ctx)
		}
		n = cleaned.BufferRows + int64(cleaned.LocalFiles+cleaned.Deleted)
	case RoleCleanPublished:
		cleaned, err = l.CleanPublished(ctx)
		n = int64(cleaned.Expired + cleaned.Deleted)
	case RoleRetain:
		n, err = r.retain(ctx, l)
	}
	if err == nil {
		err = r.schedule(ctx, l, st)
	}
	took := time.Since(start).Round(time.Millisecond)
	switch {
	case errors.Is(err, ErrBusy):
		r.logger.Debug("another process runs this step; skipped", "log", dir, "err", err)
		return false
	case err != nil:
		r.failures.Error(ctx, "step "+dir, "pass failed; retrying next pass", "log", dir, "rows", n, "err", err)
		// Reopen next time: the handle may be what went wrong.
		r.drop(dir)
		return false
	case n > 0 && (r.role == RoleClean || r.role == RoleCleanPublished):
		r.logger.Info("cleaned", "log", dir, "buffer_rows", cleaned.BufferRows, "local_files", cleaned.LocalFiles,
			"expired_snapshots", cleaned.Expired, "deleted", cleaned.Deleted, "took", took)
	case n > 0:
		r.logger.Info(passVerb(r.role), "log", dir, "rows", n, "flush", flush, "took", took)
	}
	r.failures.Recovered(ctx, "step "+dir, "pass succeeds again", "log", dir)
	return true
}

// schedule sets when a clean step of l is due next whatever its Activity:
// when the first queued deletion's grace ends, and one retention from now
// (a file or snapshot the step kept for its age may be old enough then).
// Seal, compact and publish act only on commits and flush boundaries.
func (r *runner) schedule(ctx context.Context, l *Log, st *logState) error {
	var windows []time.Duration
	cfg, o := l.Config(), r.override
	switch r.role {
	case RoleClean:
		windows = []time.Duration{cmp.Or(o.StagingRetention, cfg.StagingRetention)}
	case RoleCleanPublished:
		windows = []time.Duration{cmp.Or(o.PublishedSnapshotRetention, cfg.PublishedSnapshotRetention), cmp.Or(o.DeleteGrace, cfg.DeleteGrace)}
	default:
		return nil
	}
	now := r.clock.Now()
	if !st.due.After(now) {
		st.due = time.Time{} // it came due and this step ran
	}
	earlier := func(t time.Time) {
		if st.due.IsZero() || t.Before(st.due) {
			st.due = t
		}
	}
	for _, w := range windows {
		earlier(now.Add(max(w, 0)))
	}
	next, ok, err := l.NextDue(ctx)
	if err != nil {
		return err
	}
	if ok {
		earlier(next)
	}
	return nil
}

// publishFlush decides whether this publish pass flushes: at a boundary,
// and after it until the table holds everything committed at the boundary
// (seal, flushing at the same boundary, may finish after this pass).
func (r *runner) publishFlush(ctx context.Context, l *Log, st *logState, flush bool) (bool, error) {
	if flush {
		_, end, err := l.Extent(ctx)
		if err != nil {
			return false, err
		}
		through, err := l.PublishedThrough(ctx)
		if err != nil {
			return false, err
		}
		if through+1 < end {
			st.flushTo = end
		}
		// Seal flushes at the same boundary; give it a moment, so this
		// pass, not the next, publishes what it cuts. A log whose table
		// holds every row has nothing to wait for.
		deadline := time.Now().Add(r.sealWait)
		for through+1 < end && time.Now().Before(deadline) {
			sealed, err := l.sealedEnd(ctx)
			if err != nil || sealed >= end {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		return true, nil
	}
	if st.flushTo == 0 {
		return false, nil
	}
	through, err := l.PublishedThrough(ctx)
	if err != nil {
		return false, err
	}
	if through+1 >= st.flushTo {
		st.flushTo = 0
		return false, nil
	}
	return true, nil
}

// OverrideConfig is the command line's overrides (MaintainArgs' Override)
// as the log Config that MaintainOptions.Override takes.
func OverrideConfig(o Override) Config {
	return Config{
		StagingRetention:           o.StagingRetention,
		StagingMaxBytes:            o.StagingMaxBytes,
		PublishedSnapshotRetention: o.PublishedSnapshotRetention,
		DeleteGrace:                o.DeleteGrace,
		LocalDeleteGrace:           o.LocalDeleteGrace,
		RetentionGrace:             o.RetentionGrace,
		S3:                         warehouse.S3{Endpoint: o.S3Endpoint, Region: o.S3Region, PathStyle: o.S3PathStyle},
	}
}

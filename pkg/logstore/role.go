package logstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/charmbracelet/log"
)

// Role names a maintenance step that `streamcast maintain` runs in a loop
// over one or more logs, beside the serving Writer.
type Role string

// The roles this package runs.
const (
	// RoleSeal seals full targets every pass, and everything buffered once
	// per FlushEvery.
	RoleSeal Role = "seal"
	// RoleCompact merges small local files into larger ones.
	RoleCompact Role = "compact"
	// RolePublish pushes finished files into the published table every
	// pass, and every file once per FlushEvery.
	RolePublish Role = "publish"
	// RoleClean evicts buffered rows that files hold, takes published
	// local files out past retention and drains the local delete queue.
	RoleClean Role = "clean"
	// RoleCleanPublished expires old snapshots of the published table and
	// deletes what nothing references any more, after the grace.
	RoleCleanPublished Role = "clean-published"
	// RoleRetain runs a stream's retention pass (publish the floor, then
	// delete below it after the grace). The pass is the stream's, not the
	// log's: it reads the stream's metadata, which this package must not
	// import, so the caller supplies it (RoleOptions.Retain).
	RoleRetain Role = "retain"
)

// RoleOptions tunes RunRole.
type RoleOptions struct {
	// Every is the pause between passes; it must be positive.
	Every time.Duration
	// FlushEvery makes seal and publish flush once per interval, at
	// wall-clock multiples of it (so every process agrees when, across
	// restarts): seal cuts everything buffered, and publish pushes every
	// file, on each pass until the table holds everything that was
	// committed at the boundary. 0 never flushes on a schedule.
	FlushEvery time.Duration
	// Flush, when it delivers, makes the next pass run at once and flush
	// (compact too merges every run then); see Flushed.
	Flush <-chan struct{}
	// Flushed, when set, is called after each pass that Flush asked for.
	Flushed func()
	// Ready, when set, is called once, after every log has been opened.
	Ready func()
	// Override replaces the retention, grace and S3 settings stored in each
	// log's config where it sets them (non-zero fields only).
	Override Config
	// Passes stops the loop after this many passes; 0 runs until ctx ends.
	Passes int
	// Logger receives a line per failed pass and per pass that did work,
	// each with the role; nil discards them.
	Logger *log.Logger
	// Retain is the retain role's step, called once per pass with each
	// log (opened as a Maintainer, with the clock and overrides): the
	// stream retention pass of the stream the log is current in. It
	// returns how many rows and files it deleted. Required for RoleRetain,
	// ignored otherwise.
	Retain func(ctx context.Context, l *Log) (int64, error)
	// Clock tells the time, for the flush schedule and for every log the
	// loop opens (grace and retention); nil is the system clock. The pause
	// between passes is a real timer whatever the clock says.
	Clock Clock
}

// RunRole runs role over the logs in dirs, one pass over every log after
// another, until ctx ends (then it finishes the pass it is in) or Passes
// passes ran. A directory that holds no log when RunRole starts is an
// error (wrapping fs.ErrNotExist): a mistyped path would otherwise be
// retried forever. After that, a log that fails to open, or a step that
// fails, is logged and tried again on the next pass: one bad log or one
// bad moment (an unreachable S3, say) never stops the loop, and nothing is
// lost by a retry. A step another process holds the role lock for is
// skipped quietly.
func RunRole(ctx context.Context, role Role, dirs []string, opts RoleOptions) error {
	if !knownRole(role) {
		return fmt.Errorf("unknown maintenance role %q; the roles are %s", role, strings.Join(RoleNames(), ", "))
	}
	if len(dirs) == 0 {
		return errors.New("no logs to maintain: give at least one log directory")
	}
	for _, dir := range dirs {
		buf := filepath.Join(dir, bufferFile)
		if _, err := os.Stat(buf); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no log at %s (%s is missing): give the directory of an existing log, <root>/<stream>/<log>; "+
				"serve creates one for each durable stream in its config: %w", dir, buf, fs.ErrNotExist)
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
	logger := opts.Logger
	if logger == nil {
		logger = log.New(io.Discard)
	}
	// The role once, here: a caller's logger must not add it again.
	logger = logger.With("role", string(role))
	now := opts.Clock.Now
	r := &roleRunner{role: role, dirs: dirs, logger: logger, logs: map[string]*Log{}, override: opts.Override, flushTo: map[string]int64{},
		sealWait: min(opts.Every, 2*time.Second), clock: opts.Clock, retain: opts.Retain}
	defer r.close()

	var nextFlush time.Time
	if opts.FlushEvery > 0 {
		nextFlush = now().Truncate(opts.FlushEvery).Add(opts.FlushEvery)
	}
	forced, ready := false, false
	for pass := 1; ; pass++ {
		t := now()
		flush := forced
		if opts.FlushEvery > 0 && !t.Before(nextFlush) {
			flush = true
			nextFlush = t.Truncate(opts.FlushEvery).Add(opts.FlushEvery)
		}
		// The pass ignores cancellation: a signal ends the loop after the
		// pass, never in the middle of a step.
		if r.openAll() && !ready {
			ready = true
			if opts.Ready != nil {
				opts.Ready()
			}
		}
		r.pass(context.WithoutCancel(ctx), flush, forced)
		if forced && opts.Flushed != nil {
			opts.Flushed()
		}
		forced = false
		if opts.Passes > 0 && pass >= opts.Passes {
			return nil
		}
		wait := opts.Every
		if opts.FlushEvery > 0 {
			if d := nextFlush.Sub(now()); d < wait {
				wait = max(d, 0)
			}
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		case <-opts.Flush:
			timer.Stop()
			forced = true
		}
	}
}

type roleRunner struct {
	role     Role
	dirs     []string
	logger   *log.Logger
	logs     map[string]*Log
	override Config
	// flushTo is, per log, the end the published table must reach before
	// publish stops flushing: the log's end at the last flush boundary.
	flushTo map[string]int64
	// sealWait bounds how long a flushing publish pass waits for the seal
	// role's flush at the same boundary.
	sealWait time.Duration
	clock    Clock // every log's clock
	retain   func(ctx context.Context, l *Log) (int64, error)
}

func (r *roleRunner) close() {
	for dir, l := range r.logs {
		if err := l.Close(); err != nil {
			r.logger.Warn("close log", "log", dir, "err", err)
		}
	}
}

// openAll opens the logs not open yet and reports whether all are.
func (r *roleRunner) openAll() bool {
	all := true
	for _, dir := range r.dirs {
		_, ok := r.open(dir)
		all = all && ok
	}
	return all
}

// pass runs the role's step once over every log.
func (r *roleRunner) pass(ctx context.Context, flush, forced bool) {
	for _, dir := range r.dirs {
		r.step(ctx, dir, flush, forced)
	}
}

func (r *roleRunner) open(dir string) (*Log, bool) {
	if l, ok := r.logs[dir]; ok {
		return l, true
	}
	l, err := Open(dir, Maintainer, WithClock(r.clock))
	if err != nil {
		r.logger.Error("cannot open log; retrying next pass", "log", dir, "err", err)
		return nil, false
	}
	l.setOverride(r.override)
	r.logs[dir] = l
	return l, true
}

// step runs the role on one log.
func (r *roleRunner) step(ctx context.Context, dir string, flush, forced bool) {
	defer func() {
		// A step must never take the loop down; report and go on.
		if p := recover(); p != nil {
			r.logger.Error("maintenance step crashed; retrying next pass", "log", dir, "panic", p)
			r.drop(dir)
		}
	}()
	l, ok := r.logs[dir]
	if !ok {
		return // openAll reported why
	}
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
		flush, err = r.publishFlush(ctx, l, dir, flush)
		if err == nil {
			n, err = l.Publish(ctx, flush)
		}
	case RoleClean:
		cleaned, err = l.Clean(ctx)
		n = cleaned.BufferRows + int64(cleaned.LocalFiles+cleaned.Deleted)
	case RoleCleanPublished:
		cleaned, err = l.CleanPublished(ctx)
		n = int64(cleaned.Expired + cleaned.Deleted)
	case RoleRetain:
		n, err = r.retain(ctx, l)
	}
	took := time.Since(start).Round(time.Millisecond)
	switch {
	case errors.Is(err, ErrBusy):
		r.logger.Debug("another process runs this step; skipped", "log", dir, "err", err)
	case err != nil:
		r.logger.Error("pass failed; retrying next pass", "log", dir, "rows", n, "err", err)
		// Reopen next time: the handle may be what went wrong.
		r.drop(dir)
	case n > 0 && (r.role == RoleClean || r.role == RoleCleanPublished):
		r.logger.Info("cleaned", "log", dir, "buffer_rows", cleaned.BufferRows, "local_files", cleaned.LocalFiles,
			"expired_snapshots", cleaned.Expired, "deleted", cleaned.Deleted, "took", took)
	case n > 0:
		r.logger.Info(passVerb(r.role), "log", dir, "rows", n, "flush", flush, "took", took)
	}
}

// publishFlush decides whether this publish pass flushes: at a boundary,
// and after it until the table holds everything committed at the boundary
// (seal, flushing at the same boundary, may finish after this pass).
func (r *roleRunner) publishFlush(ctx context.Context, l *Log, dir string, flush bool) (bool, error) {
	if flush {
		_, end, err := l.Extent(ctx)
		if err != nil {
			return false, err
		}
		r.flushTo[dir] = end
		// Seal flushes at the same boundary; give it a moment, so this
		// pass, not the next, publishes what it cuts.
		deadline := time.Now().Add(r.sealWait)
		for time.Now().Before(deadline) {
			sealed, _, err := sealedEnd(ctx, l.rdb, l.tiers)
			if err != nil || sealed >= end {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		return true, nil
	}
	to, ok := r.flushTo[dir]
	if !ok {
		return false, nil
	}
	through, err := l.PublishedThrough(ctx)
	if err != nil {
		return false, err
	}
	if through+1 >= to {
		delete(r.flushTo, dir)
		return false, nil
	}
	return true, nil
}

func (r *roleRunner) drop(dir string) {
	if l, ok := r.logs[dir]; ok {
		_ = l.Close()
		delete(r.logs, dir)
	}
}

func passVerb(role Role) string {
	switch role {
	case RoleSeal:
		return "sealed"
	case RoleCompact:
		return "compacted"
	case RolePublish:
		return "published"
	case RoleRetain:
		return "retained"
	}
	return "evicted"
}

// Roles returns the roles RunRole accepts, in the order serve starts them.
func Roles() []Role {
	return []Role{RoleSeal, RoleCompact, RolePublish, RoleClean, RoleCleanPublished, RoleRetain}
}

// RoleNames returns Roles as strings, for usage texts and completions.
func RoleNames() []string {
	roles := Roles()
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	return names
}

func knownRole(r Role) bool {
	for _, k := range Roles() {
		if k == r {
			return true
		}
	}
	return false
}

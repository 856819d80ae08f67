package logstore

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	// RoleClean evicts buffered rows that sealed files hold.
	RoleClean Role = "clean"
)

// Roles lists the roles RunRole accepts.
var Roles = []Role{RoleSeal, RoleClean}

// RoleOptions tunes RunRole.
type RoleOptions struct {
	// Every is the pause between passes; it must be positive.
	Every time.Duration
	// FlushEvery makes one seal pass per interval a flush, at wall-clock
	// multiples of it (so every process agrees when, across restarts);
	// 0 never flushes on a schedule.
	FlushEvery time.Duration
	// Flush, when it delivers, makes the next pass run at once and flush.
	Flush <-chan struct{}
	// Passes stops the loop after this many passes; 0 runs until ctx ends.
	Passes int
	// Logger receives a line per failed pass and per pass that did work;
	// nil discards them.
	Logger *log.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// RunRole runs role over the logs in dirs, one pass over every log after
// another, until ctx ends (then it finishes the pass it is in) or Passes
// passes ran. A log that fails to open, or a step that fails, is logged
// and tried again on the next pass: one bad log or one bad moment never
// stops the loop. A step another process holds the role lock for is
// skipped quietly.
func RunRole(ctx context.Context, role Role, dirs []string, opts RoleOptions) error {
	if role != RoleSeal && role != RoleClean {
		return fmt.Errorf("unknown maintenance role %q; the roles are %v", role, Roles)
	}
	if len(dirs) == 0 {
		return errors.New("no logs to maintain: give at least one log directory")
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
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	r := &roleRunner{role: role, dirs: dirs, logger: logger, logs: map[string]*Log{}}
	defer r.close()

	var nextFlush time.Time
	if opts.FlushEvery > 0 {
		nextFlush = now().Truncate(opts.FlushEvery).Add(opts.FlushEvery)
	}
	forced := false
	for pass := 1; ; pass++ {
		t := now()
		flush := forced
		if opts.FlushEvery > 0 && !t.Before(nextFlush) {
			flush = true
			nextFlush = t.Truncate(opts.FlushEvery).Add(opts.FlushEvery)
		}
		forced = false
		// The pass ignores cancellation: a signal ends the loop after the
		// pass, never in the middle of a step.
		r.pass(context.WithoutCancel(ctx), flush)
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
	role   Role
	dirs   []string
	logger *log.Logger
	logs   map[string]*Log
}

func (r *roleRunner) close() {
	for dir, l := range r.logs {
		if err := l.Close(); err != nil {
			r.logger.Warn("close log", "role", r.role, "log", dir, "err", err)
		}
	}
}

// pass runs the role's step once over every log.
func (r *roleRunner) pass(ctx context.Context, flush bool) {
	for _, dir := range r.dirs {
		r.step(ctx, dir, flush)
	}
}

func (r *roleRunner) step(ctx context.Context, dir string, flush bool) {
	defer func() {
		// A step must never take the loop down; report and go on.
		if p := recover(); p != nil {
			r.logger.Error("maintenance step crashed; retrying next pass", "role", r.role, "log", dir, "panic", p)
			r.drop(dir)
		}
	}()
	l, ok := r.logs[dir]
	if !ok {
		var err error
		l, err = Open(dir, Maintainer)
		if err != nil {
			r.logger.Error("cannot open log; retrying next pass", "role", r.role, "log", dir, "err", err)
			return
		}
		r.logs[dir] = l
	}
	start := time.Now()
	var n int64
	var err error
	switch r.role {
	case RoleSeal:
		n, err = l.Seal(ctx, flush)
	case RoleClean:
		n, err = l.Evict(ctx)
	}
	switch {
	case errors.Is(err, ErrBusy):
		r.logger.Debug("another process runs this step; skipped", "role", r.role, "log", dir, "err", err)
	case err != nil:
		r.logger.Error("pass failed; retrying next pass", "role", r.role, "log", dir, "rows", n, "err", err)
		// Reopen next time: the handle may be what went wrong.
		r.drop(dir)
	case n > 0:
		r.logger.Info(passVerb(r.role), "log", dir, "rows", n, "flush", flush, "took", time.Since(start).Round(time.Millisecond))
	}
}

func (r *roleRunner) drop(dir string) {
	if l, ok := r.logs[dir]; ok {
		_ = l.Close()
		delete(r.logs, dir)
	}
}

func passVerb(role Role) string {
	if role == RoleSeal {
		return "sealed"
	}
	return "evicted"
}

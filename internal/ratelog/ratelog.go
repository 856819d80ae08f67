package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Limiter rate-limits log lines per key. The zero value is not usable; use
// New. It is safe for concurrent use.
type Limiter struct {
	logger *slog.Logger
	every  time.Duration
	now    func() time.Time

	mu      sync.Mutex
	failing map[string]*failure
}

type failure struct {
	logged     time.Time // when a line for this key was last written
	suppressed int       // occurrences since then that were only counted
	total      int       // occurrences since the failure began
}

// New returns a limiter that writes to logger at most one line per key per
// interval. now is the clock (time.Now when nil), injected by tests.
func New(logger *slog.Logger, every time.Duration, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{logger: logger, every: every, now: now, failing: map[string]*failure{}}
}

// Error reports one occurrence of the failure named key. The first one is
// logged at once at ERROR with msg and args; later ones within the interval
// are counted, and the first one after it is logged with "repeated", the
// number of occurrences not logged since the last line.
func (l *Limiter) Error(ctx context.Context, key, msg string, args ...any) {
	now := l.now()
	l.mu.Lock()
	f, ok := l.failing[key]
	if !ok {
		f = &failure{}
		l.failing[key] = f
	}
	f.total++
	if ok && now.Sub(f.logged) < l.every {
		f.suppressed++
		l.mu.Unlock()
		return
	}
	repeated := f.suppressed
	f.logged, f.suppressed = now, 0
	l.mu.Unlock()
	if repeated > 0 {
		args = append(args, "repeated", repeated, "since", l.every.String()+" ago or less")
	}
	l.logger.Log(ctx, slog.LevelError, msg, args...)
}

// Recovered reports that the failure named key cleared: if it had
// occurred, one INFO line says so with the number of occurrences in all,
// and the next occurrence is logged at once again. It costs a map lookup
// when nothing failed.
func (l *Limiter) Recovered(ctx context.Context, key, msg string, args ...any) {
	l.mu.Lock()
	f, ok := l.failing[key]
	if ok {
		delete(l.failing, key)
	}
	l.mu.Unlock()
	if !ok {
		return
	}
	l.logger.Log(ctx, slog.LevelInfo, msg, append(args, "failures", f.total)...)
}

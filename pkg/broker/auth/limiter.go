package auth

import (
	"context"
	"errors"
	"runtime"
	"time"
)

// ErrBusy is returned by Authenticate when the server is already running as
// many bcrypt comparisons as it allows and as many more are waiting: the
// request is refused at once (503), not queued without bound, so a flood of
// logins costs the server a fixed share of its CPU.
var ErrBusy = errors.New("the server is checking too many logins at once")

// Limiter bounds the bcrypt comparisons the server runs at once. A
// comparison at cost 12 takes about a quarter of a CPU-second, so without
// a bound a few hundred concurrent logins, good or bad, take every core
// from the streams. Limiter holds Slots comparisons running and at most
// Queue more waiting, each for at most MaxWait; beyond that Acquire fails
// at once with ErrBusy. Safe for concurrent use; it owns no goroutine.
type Limiter struct {
	slots   chan struct{}
	queue   chan struct{}
	maxWait time.Duration
}

// LimiterMaxWait is how long a login waits for a free comparison slot.
const LimiterMaxWait = 2 * time.Second

// NewLimiter returns a Limiter of slots running and queue waiting
// comparisons. DefaultLimiter sizes one for this machine.
func NewLimiter(slots, queue int, maxWait time.Duration) *Limiter {
	return &Limiter{slots: make(chan struct{}, max(slots, 1)), queue: make(chan struct{}, max(queue, 0)), maxWait: maxWait}
}

// DefaultLimiter lets half the CPUs the process may use (at least one)
// run bcrypt, so the rest always serve the streams, with eight waiters per
// slot: a burst of reconnecting clients after a restart is served within
// about two seconds rather than refused.
func DefaultLimiter() *Limiter {
	slots := max(runtime.GOMAXPROCS(0)/2, 1)
	return NewLimiter(slots, 8*slots, LimiterMaxWait)
}

// Acquire takes a comparison slot, waiting for one while the queue has
// room, for at most the limiter's MaxWait and while ctx lasts. It returns
// the slot's release, or ErrBusy (or ctx's error).
func (l *Limiter) Acquire(ctx context.Context) (release func(), err error) {
	release = func() { <-l.slots }
	select {
	case l.slots <- struct{}{}:
		return release, nil
	default:
	}
	select {
	case l.queue <- struct{}{}:
	default:
		return nil, ErrBusy
	}
	defer func() { <-l.queue }()
	t := time.NewTimer(l.maxWait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return release, nil
	case <-t.C:
		return nil, ErrBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

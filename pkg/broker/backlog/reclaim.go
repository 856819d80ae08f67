package backlog

import (
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
)

// Reclaiming memory after a mass drop. Thousands of stalled subscribers can
// hold hundreds of megabytes of queue (max_backlog frames each); once they
// are dropped (4429) nothing pins that memory any more, but the Go runtime
// gives it back to the OS only after a collection it may not run for
// minutes (an idle server allocates nothing that would trigger one) and then
// only gradually. The Reclaimer forces both, off the hot path: a connection
// notes the bytes of queue it lets go (a subscriber's queue when it is
// dropped with 4429, a ring larger than keptCap slots once drained,
// the whole queue when it ends) with an atomic add
// and a non-blocking wake, and one goroutine calls debug.FreeOSMemory once
// a large amount has been let go, after the letting go has paused and at
// most once per interval.
const (
	// reclaimThreshold is how many bytes of queue must have been let go
	// since the last reclaim before another is worth a forced collection:
	// the rings of about 85 stalled subscribers at max_backlog 8192.
	reclaimThreshold = 16 << 20
	// reclaimSettle is the pause in letting go that a reclaim waits for,
	// so one collection covers a whole mass drop.
	reclaimSettle = time.Second
	// reclaimMaxWait bounds that wait while connections keep letting go.
	reclaimMaxWait = 15 * time.Second
	// reclaimInterval is the least time between two reclaims: a forced
	// collection costs CPU in proportion to the live heap.
	reclaimInterval = 10 * time.Second
)

// Reclaimer returns memory to the OS after connections holding large queues
// end. Its owner starts Run on one goroutine and stops it by closing Run's
// stop channel; Note may be called from any goroutine.
type Reclaimer struct {
	released atomic.Int64  // bytes let go since the last reclaim
	notes    atomic.Int64  // notes so far: run waits until they pause
	wake     chan struct{} // capacity 1: a note past the threshold wakes run
	reclaims atomic.Int64  // reclaims done (tests observe them)

	threshold int64
	settle    time.Duration
	maxWait   time.Duration
	interval  time.Duration
	free      func() // debug.FreeOSMemory
	logger    *log.Logger
}

// NewReclaimer returns a Reclaimer that logs each reclaim to logger at
// debug level.
func NewReclaimer(logger *log.Logger) *Reclaimer {
	return &Reclaimer{
		wake:      make(chan struct{}, 1),
		threshold: reclaimThreshold,
		settle:    reclaimSettle,
		maxWait:   reclaimMaxWait,
		interval:  reclaimInterval,
		free:      debug.FreeOSMemory,
		logger:    logger,
	}
}

// Note records that a connection let go of n bytes of queue. It never
// blocks.
func (r *Reclaimer) Note(n int64) {
	if n <= 0 {
		return
	}
	r.notes.Add(1)
	if r.released.Add(n) >= r.threshold {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// Run reclaims until stop is closed.
func (r *Reclaimer) Run(stop <-chan struct{}) {
	var last time.Time
	sleep := func(d time.Duration) bool {
		if d <= 0 {
			return true
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-stop:
			return false
		case <-t.C:
			return true
		}
	}
	for {
		select {
		case <-stop:
			return
		case <-r.wake:
		}
		if r.released.Load() < r.threshold {
			continue
		}
		// Wait until connections stop letting go (bounded), so one
		// collection covers a mass drop.
		for waited := time.Duration(0); waited < r.maxWait; waited += r.settle {
			seen := r.notes.Load()
			if !sleep(r.settle) {
				return
			}
			if r.notes.Load() == seen {
				break
			}
		}
		if !last.IsZero() && !sleep(r.interval-time.Since(last)) {
			return
		}
		n := r.released.Swap(0)
		start := time.Now()
		r.free()
		last = time.Now()
		r.reclaims.Add(1)
		r.logger.Debug("returned memory to the OS after connections holding large queues ended",
			"released_mib", n>>20, "took", last.Sub(start).Round(time.Millisecond))
	}
}

package broker

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
// only gradually. The reclaimer forces both, off the hot path: a connection
// that ends notes the bytes its queue held (an atomic add and a non-blocking
// wake), and one goroutine calls debug.FreeOSMemory once a large amount has
// been let go, after the drop has settled and at most once per interval.
const (
	// reclaimThreshold is how many bytes of queue must have been let go
	// since the last reclaim before another is worth a forced collection.
	reclaimThreshold = 64 << 20
	// reclaimSettle lets the rest of a mass drop end before reclaiming, so
	// one collection covers it.
	reclaimSettle = time.Second
	// reclaimInterval is the least time between two reclaims: a forced
	// collection costs CPU in proportion to the live heap.
	reclaimInterval = 30 * time.Second
)

// reclaimer returns memory to the OS after connections holding large queues
// end. Its goroutine is started and stopped by Server.Run.
type reclaimer struct {
	released atomic.Int64  // bytes let go since the last reclaim
	wake     chan struct{} // capacity 1: a note past the threshold wakes run
	reclaims atomic.Int64  // reclaims done (tests observe them)

	threshold int64
	settle    time.Duration
	interval  time.Duration
	free      func() // debug.FreeOSMemory
	logger    *log.Logger
}

func newReclaimer(logger *log.Logger) *reclaimer {
	return &reclaimer{
		wake:      make(chan struct{}, 1),
		threshold: reclaimThreshold,
		settle:    reclaimSettle,
		interval:  reclaimInterval,
		free:      debug.FreeOSMemory,
		logger:    logger,
	}
}

// note records that a connection let go of n bytes of queue. It never
// blocks.
func (r *reclaimer) note(n int64) {
	if n <= 0 {
		return
	}
	if r.released.Add(n) >= r.threshold {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// run reclaims until stop is closed.
func (r *reclaimer) run(stop <-chan struct{}) {
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
		if !sleep(r.settle) {
			return
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

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
// notes the bytes of queue it lets go (a subscriber's queue when it is
// dropped with 4429, a ring larger than keptCap slots once drained,
// the whole queue when it ends) with an atomic add
// and a non-blocking wake, and one goroutine calls debug.FreeOSMemory once
// a large amount has been let go, after the letting go has paused and at
// most once per interval. The filter cache reclaims the same way, after
// bursts of large where= filters, with a policy of its own.

// queuePolicy is how newReclaimer reclaims after dropped queues.
func queuePolicy() reclaimPolicy {
	return reclaimPolicy{
		// The rings of about 85 stalled subscribers at max_backlog 8192.
		Threshold: 16 << 20,
		Settle:    time.Second,
		MaxWait:   15 * time.Second,
		Interval:  10 * time.Second,
		What:      "connections holding large queues ended",
	}
}

// reclaimPolicy tunes a reclaimer.
type reclaimPolicy struct {
	// Threshold is how many bytes must have been let go since the last
	// reclaim before another is worth a forced collection.
	Threshold int64
	// Settle is the pause in letting go that a reclaim waits for, so one
	// collection covers a whole burst; MaxWait bounds that wait while
	// letting go goes on.
	Settle, MaxWait time.Duration
	// Interval is the least time between two reclaims: a forced
	// collection costs CPU in proportion to the live heap.
	Interval time.Duration
	// Tail, when set, follows a burst to its end: after a reclaim, one
	// more each Interval while at least Tail bytes were let go meanwhile,
	// so what the burst's tail leaves is given back too.
	Tail int64
	// What says what let the memory go, for the log line.
	What string
}

// reclaimer returns memory to the OS after large amounts of it are let go.
// Its owner starts Run on one goroutine and stops it by closing Run's stop
// channel; Note may be called from any goroutine.
type reclaimer struct {
	released atomic.Int64  // bytes let go since the last reclaim
	notes    atomic.Int64  // notes so far: run waits until they pause
	wake     chan struct{} // capacity 1: a note past the threshold wakes run

	reclaimPolicy
	free   func() // debug.FreeOSMemory
	logger *log.Logger
}

// newReclaimer returns a reclaimer for dropped queues (queuePolicy) that
// logs each reclaim to logger at debug level.
func newReclaimer(logger *log.Logger) *reclaimer {
	return newReclaimerWith(logger, queuePolicy())
}

// newReclaimerWith returns a reclaimer that reclaims as p says.
func newReclaimerWith(logger *log.Logger, p reclaimPolicy) *reclaimer {
	return &reclaimer{wake: make(chan struct{}, 1), reclaimPolicy: p, free: debug.FreeOSMemory, logger: logger}
}

// Note records that n bytes were let go (or, under a Tail policy, came
// and may leave garbage behind). It never blocks.
func (r *reclaimer) Note(n int64) {
	if n <= 0 {
		return
	}
	r.notes.Add(1)
	if r.released.Add(n) >= r.Threshold {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// Run reclaims until stop is closed.
func (r *reclaimer) Run(stop <-chan struct{}) {
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
		if r.released.Load() < r.Threshold {
			continue
		}
		// Wait until connections stop letting go (bounded), so one
		// collection covers a mass drop.
		for waited := time.Duration(0); waited < r.MaxWait; waited += r.Settle {
			seen := r.notes.Load()
			if !sleep(r.Settle) {
				return
			}
			if r.notes.Load() == seen {
				break
			}
		}
		if !last.IsZero() && !sleep(r.Interval-time.Since(last)) {
			return
		}
		for {
			n := r.released.Swap(0)
			start := time.Now()
			r.free()
			last = time.Now()
			r.logger.Debug("returned memory to the OS after "+r.What,
				"released_mib", n>>20, "took", last.Sub(start).Round(time.Millisecond))
			if r.Tail <= 0 {
				break
			}
			if !sleep(r.Interval) {
				return
			}
			if r.released.Load() < r.Tail {
				break
			}
		}
	}
}

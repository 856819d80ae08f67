package broker

import (
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/log"
)

// TestReclaimerFreesOnceAfterALargeDropAndAtMostOncePerInterval: queue let
// go below the threshold reclaims nothing; crossing it reclaims once, after
// the notes pause; crossing it again soon after waits out the interval.
func TestReclaimerFreesOnceAfterALargeDropAndAtMostOncePerInterval(t *testing.T) {
	r := newReclaimer(log.New(io.Discard))
	r.Threshold, r.Settle, r.Interval = 1000, 5*time.Millisecond, 300*time.Millisecond
	freed := make(chan time.Time, 4)
	var reclaims atomic.Int64 // reclaims done: calls of free
	r.free = func() { reclaims.Add(1); freed <- time.Now() }
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); r.Run(stop) }()
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop); <-done }) }
	defer halt()

	r.Note(600) // below the threshold: nothing to reclaim yet
	r.Note(600) // crosses it
	var first time.Time
	select {
	case first = <-freed:
	case <-time.After(10 * time.Second):
		t.Fatal("no reclaim after 1200 bytes were let go, over a threshold of 1000")
	}
	if got := r.released.Load(); got != 0 {
		t.Errorf("%d bytes still counted after the reclaim", got)
	}
	r.Note(2000)
	select {
	case second := <-freed:
		if gap := second.Sub(first); gap < r.Interval {
			t.Errorf("reclaimed again after %v; at most once per %v", gap, r.Interval)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no second reclaim after another large drop")
	}
	// Stopping Run first makes the count final.
	halt()
	if n := reclaims.Load(); n != 2 {
		t.Errorf("%d reclaims, want 2", n)
	}
}

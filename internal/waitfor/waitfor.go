package waitfor

import (
	"context"
	"sync"
	"time"
)

// Sleep waits d, reporting false when ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Group waits for wg, reporting false when d passed first. On a timeout the
// goroutine that waits on wg lives on until wg is done: callers use it only
// for groups whose members are already being stopped.
func Group(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

package loadgen

import (
	"context"
	"math"
	"time"

	"github.com/streamcast/streamcast/internal/waitfor"
)

// pacer releases a publisher's frames on a schedule: one frame every
// rows/rate seconds from start, or back to back when the rate is 0. The
// clock is passed in so a test can check the schedule by counting frames
// rather than by timing them.
type pacer struct {
	interval time.Duration // 0: no pacing
	due      time.Time     // when the next frame may go
	now      func() time.Time
	sleep    func(ctx context.Context, d time.Duration) bool
	// beforeSleep, when set, runs before next waits: the publisher
	// sends the frames it holds, which would otherwise wait with it.
	beforeSleep func()
}

func newPacer(start time.Time, rate float64, rows int, now func() time.Time) *pacer {
	p := &pacer{due: start, now: now, sleep: waitfor.Sleep}
	if rate > 0 {
		// Rounded up to the nanosecond, so the schedule never runs ahead
		// of the rate.
		p.interval = time.Duration(math.Ceil(float64(time.Second) * float64(rows) / rate))
	}
	return p
}

// next waits until the next frame is due and returns the time to stamp it
// with; ok is false once deadline has passed or ctx ended.
func (p *pacer) next(ctx context.Context, deadline time.Time) (now time.Time, ok bool) {
	now = p.now()
	if p.interval > 0 {
		if wait := p.due.Sub(now); wait > 0 {
			if p.beforeSleep != nil {
				p.beforeSleep()
			}
			if !p.sleep(ctx, wait) {
				return now, false
			}
			now = p.now()
		}
		p.due = p.due.Add(p.interval)
		if p.due.Before(now.Add(-time.Second)) {
			p.due = now // fell far behind the schedule: do not burst to catch up
		}
	}
	if !now.Before(deadline) {
		return now, false
	}
	return now, true
}

package loadgen

import (
	"context"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when the pacer sleeps.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }
func (c *fakeClock) sleep(_ context.Context, d time.Duration) bool {
	c.t = c.t.Add(d)
	return true
}

func TestThePacerReleasesFramesOnSchedule(t *testing.T) {
	tests := []struct {
		rate float64
		rows int
		dur  time.Duration
		want int // frames released within dur
	}{
		{500, 1, time.Second, 500},
		{500, 5, time.Second, 100},
		{1000, 10, 250 * time.Millisecond, 25},
		{3, 1, 2 * time.Second, 6},
	}
	for _, tt := range tests {
		clock := &fakeClock{t: time.Unix(1000, 0)}
		p := newPacer(clock.t, tt.rate, tt.rows, clock.now)
		p.sleep = clock.sleep
		deadline := clock.t.Add(tt.dur)
		n := 0
		var last time.Time
		for {
			at, ok := p.next(context.Background(), deadline)
			if !ok {
				break
			}
			if n > 0 && at.Sub(last) != p.interval {
				t.Errorf("rate %v × %d rows: frame %d %v after the one before, want %v", tt.rate, tt.rows, n, at.Sub(last), p.interval)
			}
			last = at
			n++
			if n > 10*tt.want {
				break
			}
		}
		if n != tt.want {
			t.Errorf("rate %v rows/s in frames of %d for %v: %d frames released, want %d", tt.rate, tt.rows, tt.dur, n, tt.want)
		}
	}
}

func TestThePacerDoesNotBurstToCatchUpAfterAStall(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	p := newPacer(clock.t, 100, 1, clock.now) // one frame every 10 ms
	p.sleep = clock.sleep
	deadline := clock.t.Add(time.Hour)
	if _, ok := p.next(context.Background(), deadline); !ok {
		t.Fatal("the first frame was not released")
	}
	clock.t = clock.t.Add(5 * time.Second) // the publisher stalled for 5 s
	// Released without waiting: the frames it fell behind by, up to the
	// one second of slack, and then the schedule starts again from now.
	start := clock.t
	n := 0
	for clock.t.Equal(start) {
		if _, ok := p.next(context.Background(), deadline); !ok {
			t.Fatal("a frame was refused before the deadline")
		}
		n++
	}
	if n > 102 {
		t.Errorf("after a 5 s stall the pacer released %d frames at once; want at most about a second's worth (100)", n)
	}
}

func TestThePacerStopsWhenItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	p := newPacer(start.Add(time.Hour), 1, 1, time.Now) // the first frame is an hour away
	if _, ok := p.next(ctx, start.Add(2*time.Hour)); ok {
		t.Error("a frame was released after the context ended")
	}
}

func TestAnUnpacedRunReleasesFramesUntilTheDeadline(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	p := newPacer(clock.t, 0, 1, clock.now)
	deadline := clock.t.Add(time.Second)
	for i := 0; i < 1000; i++ {
		if _, ok := p.next(context.Background(), deadline); !ok {
			t.Fatalf("frame %d refused before the deadline", i)
		}
	}
	clock.t = deadline
	if _, ok := p.next(context.Background(), deadline); ok {
		t.Error("a frame was released at the deadline")
	}
}

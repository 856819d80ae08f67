package broker

import (
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/wire"
)

// TestBacklogBoundCountsFramesBeingWritten is I5's bound made exact: a
// subscriber holds at most max_backlog frames, queued or being written. Its
// writer is held inside a write of the first 40 frames (the test hook stands
// for a peer whose socket is full); 24 more frames fill the bound without a
// drop, and the next one drops it with 4429. It then receives exactly
// max_backlog frames, contiguous from the first, and the 4429 names the
// offset after the last of them. A writer that took the whole queue as its
// batch would let max_backlog more frames queue behind it: the drop would
// come only at 40+64+1.
func TestBacklogBoundCountsFramesBeingWritten(t *testing.T) {
	const maxBacklog, inWrite = 64, 40
	cfg := testConfig(t)
	cfg.Limits.MaxBacklog = maxBacklog
	entered := make(chan int, 1)
	release := make(chan struct{})
	srv := startServerWith(t, cfg, Options{}, func(s *Server) {
		s.opts.writeHook = func(c *wsConn, n int, _ bool) {
			if c.pub != nil {
				return
			}
			select {
			case entered <- n:
			default:
			}
			select {
			case <-release:
			case <-time.After(30 * time.Second):
			}
		}
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	sws, g := mustDial(t, wsURL(srv, "/trades"))
	first := g.EndOffset
	var sub *wsConn
	srv.mu.Lock()
	for c := range srv.conns {
		if c.pub == nil {
			sub = c
		}
	}
	srv.mu.Unlock()
	p := dialPublisher(t, srv, "trades")

	if r := p.roundTrip(batch(0, inWrite)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	select {
	case n := <-entered:
		if n != inWrite {
			t.Fatalf("the writer took %d frames, want the %d queued", n, inWrite)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the subscriber's writer never started")
	}
	closed := func() bool {
		sub.mu.Lock()
		defer sub.mu.Unlock()
		return sub.closing != nil
	}
	for i := inWrite; i < maxBacklog; i++ {
		if r := p.roundTrip(trade(i)); r.Error != "" {
			t.Fatalf("publish: %+v", r)
		}
		if closed() {
			t.Fatalf("dropped holding %d frames (%d in write), within max_backlog %d", i+1, inWrite, maxBacklog)
		}
	}
	if r := p.roundTrip(trade(maxBacklog)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	if !closed() {
		t.Fatalf("not dropped with %d frames queued or in write, over max_backlog %d", maxBacklog+1, maxBacklog)
	}
	close(release)

	_ = sws.SetReadDeadline(time.Now().Add(20 * time.Second))
	next := first
	for {
		f, err := readFrame(t, sws)
		if err != nil {
			code, reason := closeOf(err)
			if code != wire.CloseTooSlow {
				t.Fatalf("ended with %v after %d frames, want 4429", err, next-first)
			}
			ts, ok := wire.ParseClose(code, reason).(*wire.TooSlow)
			if !ok {
				t.Fatalf("4429 reason %q does not parse", reason)
			}
			if ts.Offset != next {
				t.Errorf("4429 resumes at %d; the last frame received was %d", ts.Offset, next-1)
			}
			break
		}
		if f.Offset != next {
			t.Fatalf("frame %d after %d: the prefix is not contiguous", f.Offset, next-1)
		}
		next++
	}
	if got := next - first; got != maxBacklog {
		t.Errorf("received %d frames before 4429, want exactly max_backlog = %d", got, maxBacklog)
	}
}

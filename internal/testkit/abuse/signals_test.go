package abuse

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit"
)

// follower is a subscriber that reads live frames and checks that they
// come in order, without a gap. Dropped as too slow (4429), it resumes at
// the offset the close names, as a consumer would, and that offset must be
// the one it expects next: a box this loaded may starve the follower, and
// the property under test is that nothing is lost, not its speed.
type follower struct {
	s    *server
	done chan struct{}

	mu      sync.Mutex
	ws      *websocket.Conn
	next    int64 // the offset it expects next
	err     error // why it stopped reading, or a gap
	resumed int   // times it resumed after a 4429 or a cut
	closed  bool  // the test's cleanup closed ws: no more resuming
}

func follow(t testing.TB, s *server) *follower {
	t.Helper()
	ws, g := subscribe(t, s, "/t", 0)
	f := &follower{s: s, ws: ws, done: make(chan struct{}), next: g.EndOffset}
	go func() {
		defer close(f.done)
		for {
			_, msg, err := ws.ReadMessage()
			if err != nil {
				if ws = f.resume(err); ws == nil {
					return
				}
				continue
			}
			off, _, err := frameOf(msg)
			f.mu.Lock()
			if err == nil && off != f.next {
				err = fmt.Errorf("frame %d after %d: a gap or a duplicate", off, f.next-1)
			}
			f.next = off + 1
			f.mu.Unlock()
			if err != nil {
				f.stop(err)
				return
			}
		}
	}()
	t.Cleanup(func() {
		f.mu.Lock()
		ws := f.ws
		f.closed = true
		f.mu.Unlock()
		ws.Close()
		<-f.done
	})
	return f
}

// resume answers a read error: after a 4429 naming the next expected
// offset it subscribes again from there and returns the new connection.
// A connection cut without a close frame (1006, or a reset) is resumed
// the same way: the server cuts a dropped subscriber that has not read its
// queued frames and the 4429 within the close grace, which a starved
// follower on a loaded box may not. A close with any other code is
// recorded and nil returned.
func (f *follower) resume(err error) *websocket.Conn {
	var ce *websocket.CloseError
	cut := !errors.As(err, &ce) || ce.Code == websocket.CloseAbnormalClosure
	if !cut && ce.Code != 4429 {
		f.stop(err)
		return nil
	}
	f.mu.Lock()
	closed, next := f.closed, f.next
	f.mu.Unlock()
	if closed {
		f.stop(err) // the test's cleanup closed it
		return nil
	}
	if !cut {
		var reason struct {
			Offset int64 `json:"offset"`
		}
		if jerr := json.Unmarshal([]byte(ce.Text), &reason); jerr != nil || reason.Offset != next {
			f.stop(fmt.Errorf("dropped with %v: the resume offset is not %d, the next one expected", err, next))
			return nil
		}
	}
	ws, _, derr := dialer(0).Dial(f.s.url(fmt.Sprintf("/t?offset=%d", next)), nil)
	if derr == nil {
		_, _, derr = ws.ReadMessage() // the greeting
	}
	if derr != nil {
		f.stop(fmt.Errorf("resume at %d after %v: %w", next, err, derr))
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		ws.Close()
		return nil
	}
	f.ws = ws
	f.resumed++
	return ws
}

func (f *follower) stop(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

func (f *follower) state() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.next, f.err
}

// caughtUp waits until the follower has read past every acknowledged row.
// The load publishes as fast as the box allows, so the follower may end a
// few hundred thousand rows behind; it fails only when the follower makes
// no progress for 30 s, not after a fixed time.
func (f *follower) caughtUp(t testing.TB, acked map[int64]string) {
	t.Helper()
	last := int64(-1)
	for off := range acked {
		last = max(last, off)
	}
	const stall = 30 * time.Second
	seen, moved := int64(-1), time.Now()
	for {
		next, err := f.state()
		if err != nil {
			t.Fatalf("the subscriber stopped: %v", err)
		}
		if next > last {
			return
		}
		if next != seen {
			seen, moved = next, time.Now()
		} else if time.Since(moved) > stall {
			t.Fatalf("the subscriber is at %d and has not moved for %v; %d was acknowledged", next, stall, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStoppedServerResumesLosingNothing stops the server (SIGSTOP) for a
// second at a time while publishers and a subscriber run, and continues it
// (SIGCONT). The load resumes after each stop, the subscriber gets every
// row in order with no gap, no acknowledged row is lost, and RSS and
// descriptors stay bounded.
func TestStoppedServerResumesLosingNothing(t *testing.T) {
	t.Parallel() // its own server process; see TestMain
	s := start(t, options{})
	f := follow(t, s)
	l := startLoad(t, s, 2, 50)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return l.count() >= 2000, fmt.Sprintf("%d rows acknowledged", l.count())
	})
	base := s.baseline()
	rounds := testkit.SoakCount(2, 10)
	for i := 0; i < rounds; i++ {
		if err := syscall.Kill(s.pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the length of the fault, not a wait for an event
		before := l.count()
		if err := syscall.Kill(s.pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 30*time.Second, func() (bool, string) {
			return l.count() >= before+1000, fmt.Sprintf("after SIGCONT %d: %d rows acknowledged, %d before", i+1, l.count(), before)
		})
	}
	t.Logf("%d stops done", rounds)
	l.stop()
	t.Logf("load stopped")
	f.caughtUp(t, l.acked)
	t.Logf("caught up")
	s.within(fmt.Sprintf("after %d stops", rounds), base, bound{rss: 64 << 20, fds: 4})
	verifyAcked(t, s, l.acked)
}

// TestKilledMaintenanceChildrenAreRestartedLosingNothing SIGKILLs every
// maintenance child of the server while publishers run. Each is restarted,
// the load goes on, no acknowledged row is lost (the rows are sealed,
// published and cleaned by the restarted children meanwhile), and the
// server's RSS and descriptors stay bounded.
func TestKilledMaintenanceChildrenAreRestartedLosingNothing(t *testing.T) {
	t.Parallel() // its own server process; see TestMain
	if testing.Short() {
		t.Skip("runs the maintenance children; skipped with -short")
	}
	if !testkit.SoakFull() {
		// About 12 s, to keep the README's test run within its budget; CI
		// runs it every time.
		t.Skip("killing the maintenance children runs under " + testkit.SoakEnv + "=full")
	}
	s := start(t, options{maintain: true})
	children := func() map[string]int {
		out := map[string]int{}
		for _, c := range s.stats().Children {
			if c.PID != nil && c.Ready {
				out[c.Role] = *c.PID
			}
		}
		return out
	}
	var roles int
	waitUntil(t, 30*time.Second, func() (bool, string) {
		roles = len(s.stats().Children)
		return roles > 0 && len(children()) == roles, fmt.Sprintf("%d of %d children ready", len(children()), roles)
	})
	f := follow(t, s)
	// Paced to about 5,000 rows a second: each round waits for restarts,
	// and an unpaced load left 4 million rows to read back after ten.
	l := startPacedLoad(t, s, 2, 50, 20*time.Millisecond)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return l.count() >= 2000, fmt.Sprintf("%d rows acknowledged", l.count())
	})
	base := s.baseline()
	// Five at full count: each round waits out the restart backoff, which
	// grows with every kill (10 rounds took 108 s of CI's 30 minutes).
	rounds := testkit.SoakCount(2, 5)
	for i := 0; i < rounds; i++ {
		killed := children()
		for _, pid := range killed {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
		before := l.count()
		waitUntil(t, 60*time.Second, func() (bool, string) {
			now := children()
			for role, pid := range killed {
				if now[role] == 0 || now[role] == pid {
					return false, fmt.Sprintf("round %d: child %s not restarted (running: %v)", i+1, role, now)
				}
			}
			return l.count() >= before+1000, fmt.Sprintf("round %d: %d rows acknowledged, %d before", i+1, l.count(), before)
		})
	}
	l.stop()
	f.caughtUp(t, l.acked)
	s.within(fmt.Sprintf("after %d rounds of killed children", rounds), base, bound{rss: 64 << 20, fds: 8})
	verifyAcked(t, s, l.acked)
}

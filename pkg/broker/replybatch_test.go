package broker

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// inboxRows is how many rows stream's inbox holds queued or being
// committed: zero once every group taken has been answered.
func inboxRows(srv *Server, stream string) int {
	return srv.reg.Get(stream).inbox.Rows()
}

// TestRepliesOfOneCommitGroupLeaveInOneWrite: the replies to every frame a
// publisher has in one commit group are handed to its writer at once, so
// they go out in one write, not one per frame. Publisher A's frame holds the
// first commit while B queues 20 single-row frames behind it; they commit
// as the second group. B's writer is held inside its first write after the
// release until that group is answered in full (the inbox empty): a
// deliverer that hands replies over one at a time has then put one reply
// in that write and the other 19 in the next; one that hands them over
// together has all 20 in it.
func TestRepliesOfOneCommitGroupLeaveInOneWrite(t *testing.T) {
	const frames = 20
	hook, entered, release := holdFirstAppend(t)
	var (
		bAddr  atomic.Value // B's client address, once B may be observed
		mu     sync.Mutex
		writes []int // frames per write of B's writer, after arming
		srv    *Server
	)
	srv = startServerWith(t, testConfig(t), Options{appendHook: hook}, func(s *Server) {
		s.opts.writeHook = func(c *wsConn, n int, claimed bool) {
			addr, _ := bAddr.Load().(string)
			if c.pub == nil || addr == "" || c.nc.RemoteAddr().String() != addr {
				return
			}
			// The writer goroutine waits for the whole group to be
			// handed over. A claimed write is made by the goroutine that
			// hands it over, after it queued this connection's replies:
			// waiting there would wait for itself.
			deadline := time.Now().Add(10 * time.Second)
			for !claimed && inboxRows(s, "trades") > 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond) // polls the observed event, capped
			}
			mu.Lock()
			writes = append(writes, n)
			mu.Unlock()
		}
	})
	t.Cleanup(release)
	a := dialPublisher(t, srv, "trades")
	b := dialPublisher(t, srv, "trades")
	if err := a.send(trade(0)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("A's frame never reached the log")
	}
	bAddr.Store(b.ws.LocalAddr().String()) // B's greeting is read: only replies follow
	for i := 1; i <= frames; i++ {
		if err := b.send(trade(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "B's frames queued behind the held commit", 10*time.Second, func() bool {
		return inboxRows(srv, "trades") == 1+frames
	})
	release()
	if r, err := a.reply(); err != nil || len(r.OK) != 1 {
		t.Fatalf("A's reply: %+v, %v", r, err)
	}
	for i := 0; i < frames; i++ {
		r, err := b.reply()
		if err != nil {
			t.Fatal(err)
		}
		if len(r.OK) != 1 || r.OK[0] != int64(i+2) {
			t.Fatalf("B's reply %d: %+v, want ok [%d]", i, r, i+2)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(writes) != 1 || writes[0] != frames {
		t.Fatalf("B's %d replies went out in writes of %v frames; want one write of %d", frames, writes, frames)
	}
}

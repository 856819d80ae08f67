package abuse

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit"
)

// TestConnectDisconnectChurnLeavesNothingBehind connects and drops
// subscribers (live, replaying, closing cleanly or vanishing) and
// publishers, in a loop, while a publisher commits rows. Afterwards the
// server's descriptors and goroutines are back at their baseline, its RSS
// is bounded, and every acknowledged row is in the log.
func TestConnectDisconnectChurnLeavesNothingBehind(t *testing.T) {
	t.Parallel() // its own server process; see TestMain
	s := start(t, options{})
	l := startLoad(t, s, 1, 10)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return l.count() >= 1000, fmt.Sprintf("%d rows acknowledged", l.count())
	})
	paths := []string{"/t", "/t?offset=0", "/t?publish", `/t?where={"id":"p0-1"}`}
	// One of each first: a replay opens the log's read connections, which
	// then stay open (bounded) and belong in the baseline.
	for _, p := range paths {
		ws, _ := subscribe(t, s, p, 0)
		ws.Close()
	}
	waitUntil(t, 10*time.Second, func() (bool, string) {
		return s.stats().Streams[0].Subscribers == 0, "the warm-up subscribers are still attached"
	})
	base := s.baseline()
	goroutines := s.stats().Process.Goroutines
	rounds := testkit.SoakCount(300, 2000) // 5,000 took 42 s of CI's 30 minutes
	for i := 0; i < rounds; i++ {
		ws, _ := subscribe(t, s, paths[i%len(paths)], 0)
		if i%2 == 0 {
			_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(5*time.Second))
		}
		ws.Close() // odd rounds vanish without a close frame
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		fds, g := s.fds(), s.stats().Process.Goroutines
		return fds <= base.fds+2 && g <= goroutines+4,
			fmt.Sprintf("after %d connections came and went the server holds %d FDs (%d before: %s) and %d goroutines (%d before)", rounds, fds, base.fds, s.fdList(), g, goroutines)
	})
	s.within("after churn", base, bound{rss: 64 << 20, fds: 2})
	l.stop()
	verifyAcked(t, s, l.acked)
}

// TestHalfOpenConnectionsAreClosedByTheHandshakeTimeout opens 1,000 TCP
// connections (3,000 under STREAMCAST_SOAK=full) that never finish an HTTP
// request (half of them send nothing, half a partial request). The server holds one descriptor for
// each and bounded memory, keeps serving others meanwhile, and closes every
// one of them when its handshake timeout passes (10 s), after which its
// descriptors are back at their baseline.
func TestHalfOpenConnectionsAreClosedByTheHandshakeTimeout(t *testing.T) {
	t.Parallel() // it mostly waits for the timeout; see TestMain
	n := connRoom(t, testkit.SoakCount(1000, 3000), 100)
	// Every connection comes from this one address.
	s := start(t, options{limits: "  max_connections_per_address: 0\n"})
	base := s.baseline()
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	opened := time.Now()
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", s.addr, 10*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if i%2 == 1 {
			if _, err := c.Write([]byte("GET /t HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n")); err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
		}
	}
	waitUntil(t, 10*time.Second, func() (bool, string) {
		fds := s.fds()
		return fds >= base.fds+n*9/10, fmt.Sprintf("the server accepted %d of %d connections", fds-base.fds, n)
	})
	s.within(fmt.Sprintf("holding %d half-open connections", n), base, bound{rss: 96 << 20, fds: n + 8})

	// It still serves.
	acked := publishRows(t, s, "meanwhile", 100)

	var wg sync.WaitGroup
	var mu sync.Mutex
	open := 0
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(opened.Add(40 * time.Second))
			b := make([]byte, 512)
			for {
				if _, err := c.Read(b); err != nil {
					if errors.Is(err, os.ErrDeadlineExceeded) {
						mu.Lock()
						open++
						mu.Unlock()
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	if open > 0 {
		t.Errorf("%d of %d half-open connections were still open 40s after they were made", open, n)
	} else {
		t.Logf("the server closed all %d within %v", n, time.Since(opened).Round(time.Second))
	}
	waitUntil(t, 20*time.Second, func() (bool, string) {
		fds := s.fds()
		return fds <= base.fds+2, fmt.Sprintf("the server holds %d FDs, %d before", fds, base.fds)
	})
	verifyAcked(t, s, acked)
}

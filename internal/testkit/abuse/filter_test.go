package abuse

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit"
)

// largeWhere is a where= of 5,000 distinct ten-byte strings on "id", 65,008
// bytes of JSON (just under the default limits.max_where_bytes), whose
// values no other salt's filter lists.
func largeWhere(salt int) string {
	var b strings.Builder
	b.Grow(65100)
	b.WriteString(`{"id":[`)
	for i := 0; i < 5000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%04d-%05d"`, salt, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// filterBytesPerSub is what one subscriber with a distinct 64 KiB filter
// may cost the server while connected: its compiled filter (about 1.3
// times the JSON), its connection, and the collector's headroom over them.
// 1,000 such subscribers may take 150 MB.
const filterBytesPerSub = 150_000

// TestDistinctLargeFiltersCostAboutTheirSizeAndAreGivenBack connects
// subscribers (1,000; 100 under -short) that each send a distinct 64 KiB
// where= filter of 5,000 strings. While they are connected the server's
// RSS settles within 150 kB per subscriber of its baseline (150 MB for
// 1,000; at least 32 MiB), and within 10 s of their closing it is back near
// the baseline:
// a filter must hold each value about once, and its memory must go back to
// the OS when its subscriber leaves, or a few hundred subscribers take the
// server's memory.
func TestDistinctLargeFiltersCostAboutTheirSizeAndAreGivenBack(t *testing.T) {
	t.Parallel()
	n := testkit.SoakCountShort(100, 150, 1000) // 1,000 (the figure's count) at full; the bound scales with n, at least 32 MiB
	connRoom(t, n, n)                           // all n, or skip
	// Every subscriber comes from this one address.
	s := start(t, options{limits: "  max_connections_per_address: 0\n"})
	// Warm the paths a filtered subscriber takes, so the baseline holds
	// their one-time costs.
	for i := 0; i < 3; i++ {
		ws, _ := subscribe(t, s, "/t?where="+url.QueryEscape(largeWhere(9000+i)), 0)
		ws.Close()
	}
	time.Sleep(500 * time.Millisecond)
	base := s.baseline()

	// The RSS at its highest while they arrive, for the log.
	var burstPeak atomic.Int64
	sampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid)); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
						kib, _ := strconv.ParseInt(f[1], 10, 64)
						burstPeak.Store(max(burstPeak.Load(), kib<<10))
					}
				}
			}
			select {
			case <-sampling:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	conns := make([]*websocket.Conn, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				ws, _, err := dialer(0).Dial(s.url("/t?where="+url.QueryEscape(largeWhere(i))), nil)
				if err == nil {
					_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
					_, _, err = ws.ReadMessage() // the greeting
					_ = ws.SetReadDeadline(time.Time{})
				}
				if err != nil {
					errs <- fmt.Errorf("subscriber %d: %w", i, err)
					if ws != nil {
						ws.Close()
					}
					continue
				}
				conns[i] = ws
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(sampling)
	<-sampled
	close(errs)
	for err := range errs {
		t.Fatalf("a subscriber with a distinct 64 KiB filter was not greeted: %v", err)
	}
	if got := s.stats().Streams[0].Subscribers; got != int64(n) {
		t.Fatalf("/stats counts %d subscribers, want %d", got, n)
	}
	// Once the arrivals' transient memory is given back (the server
	// reclaims a few seconds after a burst), what the subscribers hold
	// while they stay connected is within the bound, and stays there.
	// A few subscribers' filters are too few for the server to reclaim
	// the arrivals' transient memory: the bound has a floor.
	limit := max(int64(n)*filterBytesPerSub, 32<<20)
	connected := time.Now()
	waitUntil(t, 10*time.Second, func() (bool, string) {
		rss := s.rss()
		return rss <= base.rss+limit, fmt.Sprintf("RSS %.1f MiB %v after %d subscribers with distinct 64 KiB filters connected (burst peak %.1f MiB), over the baseline %.1f MiB + %.1f MiB",
			mib(rss), time.Since(connected).Round(100*time.Millisecond), n, mib(burstPeak.Load()), mib(base.rss), mib(limit))
	})
	settled := time.Since(connected)
	held := int64(0)
	for i := 0; i < 5; i++ {
		held = max(held, s.rss())
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%d subscribers with distinct 64 KiB filters: RSS %.1f MiB, %.1f MiB over the baseline %.1f MiB (bound %.1f MiB), %v after they connected; %.1f MiB at the arrivals' peak",
		n, mib(held), mib(held-base.rss), mib(base.rss), mib(limit), settled.Round(100*time.Millisecond), mib(burstPeak.Load()))
	if held > base.rss+limit {
		t.Errorf("RSS %.1f MiB with %d subscribers connected, over the baseline %.1f MiB + %.1f MiB", mib(held), n, mib(base.rss), mib(limit))
	}
	// While they arrive, too: the collector's headroom over the filters
	// is narrowed, so the peak stays within 150 MB of the baseline at the
	// figure's count (fewer subscribers leave too little to measure).
	if peakBound := int64(150e6); n >= 1000 && burstPeak.Load() > base.rss+peakBound {
		t.Errorf("RSS peaked at %.1f MiB while %d subscribers with distinct 64 KiB filters arrived, over the baseline %.1f MiB + 150 MB", mib(burstPeak.Load()), n, mib(base.rss))
	}

	closed := time.Now()
	for _, ws := range conns {
		ws.Close()
	}
	// Back near the baseline: within a tenth of what they took, and at
	// least 16 MiB for the runtime's own slack.
	slack := max(16<<20, (held-base.rss)/10)
	waitUntil(t, 10*time.Second, func() (bool, string) {
		rss := s.rss()
		return rss <= base.rss+slack, fmt.Sprintf("RSS %.1f MiB %v after %d filtered subscribers closed, over the baseline %.1f MiB + %.1f MiB",
			mib(rss), time.Since(closed).Round(100*time.Millisecond), n, mib(base.rss), mib(slack))
	})
	t.Logf("RSS back to %.1f MiB %v after they closed", mib(s.rss()), time.Since(closed).Round(100*time.Millisecond))
}

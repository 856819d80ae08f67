package abuse

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit"
)

// publishRows sends n rows in frames of up to 1000, 16 unanswered at a
// time, and returns the offsets acknowledged with the rows' ids.
func publishRows(t testing.TB, s *server, name string, n int) map[int64]string {
	t.Helper()
	ws, _ := subscribe(t, s, "/t?publish", 0)
	defer ws.Close()
	acked := map[int64]string{}
	type sent struct{ ids []string }
	owed := make(chan sent, 16)
	errc := make(chan error, 1)
	go func() {
		for f := range owed {
			_ = ws.SetReadDeadline(time.Now().Add(60 * time.Second))
			_, msg, err := ws.ReadMessage()
			if err != nil {
				errc <- err
				for range owed {
				}
				return
			}
			var r struct {
				OK    []*int64 `json:"ok"`
				Error string   `json:"error"`
			}
			if err := json.Unmarshal(msg, &r); err != nil || r.Error != "" || len(r.OK) != len(f.ids) {
				errc <- fmt.Errorf("publish reply %.200s", msg)
				for range owed {
				}
				return
			}
			for i, o := range r.OK {
				acked[*o] = f.ids[i]
			}
		}
		errc <- nil
	}()
	var b strings.Builder
	for i := 0; i < n; {
		k := min(1000, n-i)
		ids := make([]string, k)
		b.Reset()
		b.WriteByte('[')
		for j := range ids {
			ids[j] = fmt.Sprintf("%s-%d", name, i+j)
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":%q,"pad":%q}`, ids[j], pad)
		}
		b.WriteByte(']')
		owed <- sent{ids}
		if err := ws.WriteMessage(websocket.TextMessage, []byte(b.String())); err != nil {
			t.Fatalf("publish: %v", err)
		}
		i += k
	}
	close(owed)
	if err := <-errc; err != nil {
		t.Fatalf("publish: %v", err)
	}
	return acked
}

// kernelSlack is how many rows beyond max_backlog the tests publish to a
// stalled subscriber: the socket buffers of both ends take some frames
// before the server's writer blocks, and those are not the server's memory.
const kernelSlack = 40000

// stallOutcome is what a round of stalled subscribers cost the server.
type stallOutcome struct {
	subs       int
	maxBacklog int
	frameLen   int   // bytes of one data frame on the wire
	base       int64 // RSS before the subscribers connected
	peak       int64 // RSS with every subscriber's queue full
	after      int64 // RSS once they are gone and the server gave memory back
	prefixes   int   // sampled subscribers that read a contiguous prefix and 4429
}

// perSub is the server's RSS per stalled subscriber.
func (o stallOutcome) perSub() float64 { return float64(o.peak-o.base) / float64(o.subs) }

// frameBytes is the bytes of the frames one subscriber may hold.
func (o stallOutcome) frameBytes() float64 { return float64(o.maxBacklog * o.frameLen) }

// stallSubscribers connects subs subscribers that never read (4 KiB
// receive buffers), publishes max_backlog + kernelSlack rows so every one
// of them falls behind by more than max_backlog, and measures the server's
// RSS. sample of them then read what they were sent: a contiguous prefix
// and 4429 naming the offset after it (I5). All of them then close, and
// the server's RSS must come back within 20 s.
// A benchmark (strict false) only reports what stayed resident.
func stallSubscribers(t testing.TB, s *server, subs, maxBacklog, sample int, strict bool) stallOutcome {
	t.Helper()
	o := stallOutcome{subs: subs, maxBacklog: maxBacklog}
	// The same load without subscribers first, so the baseline includes
	// what publishing itself costs the server.
	publishRows(t, s, "warm", maxBacklog+kernelSlack)
	o.base = s.rss()
	conns := make([]*websocket.Conn, subs)
	first := int64(0)
	for i := range conns {
		ws, g := subscribe(t, s, "/t", 4096)
		conns[i] = ws
		first = g.EndOffset
	}
	defer func() {
		for _, ws := range conns {
			ws.Close()
		}
	}()
	publishRows(t, s, "load", maxBacklog+kernelSlack)
	// Every row is acknowledged only after it was offered to every
	// subscriber, so the queues are as full as they get.
	o.peak = s.rss()

	for i := 0; i < sample; i++ {
		ws := conns[i]
		next := first
		for {
			_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, msg, err := ws.ReadMessage()
			if err != nil {
				var ce *websocket.CloseError
				if !asClose(err, &ce) || ce.Code != 4429 {
					t.Fatalf("stalled subscriber %d ended with %v after %d frames, want 4429", i, err, next-first)
				}
				var reason struct {
					Offset int64 `json:"offset"`
				}
				if err := json.Unmarshal([]byte(ce.Text), &reason); err != nil || reason.Offset != next {
					t.Fatalf("4429 %q after frames [%d, %d): it must name %d", ce.Text, first, next, next)
				}
				if got := next - first; got < int64(maxBacklog) {
					t.Errorf("dropped after %d frames, fewer than max_backlog %d", got, maxBacklog)
				}
				break
			}
			off, _, err := frameOf(msg)
			if err != nil {
				t.Fatal(err)
			}
			if off != next {
				t.Fatalf("frame %d after %d: the prefix is not contiguous", off, next-1)
			}
			o.frameLen = len(msg) + 2 // + the header of a frame under 126 bytes
			next++
		}
		o.prefixes++
	}
	for _, ws := range conns {
		ws.Close()
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := s.stats().Streams[0].Subscribers
		return n == 0, fmt.Sprintf("%d subscribers still attached", n)
	})
	grown := o.peak - o.base
	limit := o.base + max(grown/5, 8<<20)
	deadline := time.Now().Add(20 * time.Second)
	for o.after = s.rss(); o.after > limit && time.Now().Before(deadline); o.after = s.rss() {
		time.Sleep(100 * time.Millisecond)
	}
	if o.after > limit && strict {
		t.Errorf("RSS %.1f MiB 20s after %d stalled subscribers were dropped; it was %.1f MiB before them and %.1f MiB with them; server log:\n%s",
			mib(o.after), subs, mib(o.base), mib(o.peak), s.logs)
	}
	if o.frameLen == 0 {
		o.frameLen = 120
	}
	return o
}

// asClose is errors.As for a close error.
func asClose(err error, ce **websocket.CloseError) bool {
	c, ok := err.(*websocket.CloseError)
	if ok {
		*ce = c
	}
	return ok
}

// TestStalledSubscribersAreDroppedAndTheirMemoryReturns: subscribers that
// never read are dropped with 4429 after a contiguous prefix; each costs
// the server at most 1.2× the bytes of the max_backlog frames it may hold,
// and once they are gone the server's RSS returns to near where it was.
func TestStalledSubscribersAreDroppedAndTheirMemoryReturns(t *testing.T) {
	t.Parallel() // its own server process; see TestMain
	const maxBacklog = 8192
	subs := testkit.SoakCount(100, 2000)
	// Every subscriber comes from this one address.
	s := start(t, options{maxBacklog: maxBacklog, limits: "  max_connections_per_address: 0\n"})
	fds := s.fds()
	o := stallSubscribers(t, s, subs, maxBacklog, 3, true)
	t.Logf("%d stalled subscribers at max_backlog %d: RSS %.1f → %.1f → %.1f MiB; %.0f KiB per subscriber; its frames are %.0f KiB",
		subs, maxBacklog, mib(o.base), mib(o.peak), mib(o.after), o.perSub()/1024, o.frameBytes()/1024)
	if o.perSub() > 1.2*o.frameBytes() {
		t.Errorf("a stalled subscriber costs %.0f KiB of RSS, over 1.2× the %.0f KiB of frames it may hold", o.perSub()/1024, o.frameBytes()/1024)
	}
	waitUntil(t, 10*time.Second, func() (bool, string) {
		n := s.fds()
		return n <= fds+2, fmt.Sprintf("the server holds %d FDs, %d before the subscribers", n, fds)
	})
}

// BenchmarkStalledSubscriberRSS reports the server's RSS per subscriber that
// never reads, at max_backlog 8192 and 1024, against the bytes of the
// frames it may hold (target: at most 1.2×). Run it with -benchtime 1x:
// each iteration is a whole round of subscribers.
func BenchmarkStalledSubscriberRSS(b *testing.B) {
	for _, maxBacklog := range []int{8192, 1024} {
		b.Run(fmt.Sprintf("max_backlog=%d", maxBacklog), func(b *testing.B) {
			subs := testkit.SoakCount(200, 2000)
			var per, ratio, after float64
			for i := 0; i < b.N; i++ {
				s := start(b, options{maxBacklog: maxBacklog, limits: "  max_connections_per_address: 0\n"})
				o := stallSubscribers(b, s, subs, maxBacklog, 1, false)
				per += o.perSub()
				ratio += o.perSub() / o.frameBytes()
				after += float64(o.after-o.base) / (1 << 20)
				s.stop()
			}
			b.ReportMetric(per/float64(b.N), "rss_B/sub")
			b.ReportMetric(ratio/float64(b.N), "rss/frame_bytes")
			b.ReportMetric(after/float64(b.N), "MiB_left_after")
		})
	}
}

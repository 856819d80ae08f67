package abuse

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/crypto/bcrypt"

	"github.com/streamcast/streamcast/internal/testkit"
)

// The users of the authenticated servers: alice is guessed at, bob
// publishes. Their hashes are at cost 12, what `streamcast auth hash`
// writes, so each comparison costs what it costs in production (about a
// quarter of a CPU-second).
const (
	alicePW   = "alice-Correct-horse"
	bobPW     = "bob-Battery-staple"
	loginCost = 12
)

// authYAML is an auth: section over alice and bob at cost 12: bob may do
// everything, alice may read.
func authYAML(t testing.TB) string {
	t.Helper()
	y, err := authSection()
	if err != nil {
		t.Fatal(err)
	}
	return y
}

// authSection is authYAML's text, hashed once for every test that uses it.
var authSection = sync.OnceValues(func() (string, error) {
	var hashes [2]string
	for i, pw := range []string{alicePW, bobPW} {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), loginCost)
		if err != nil {
			return "", err
		}
		hashes[i] = string(h)
	}
	return fmt.Sprintf(`auth:
  users:
    - name: alice
      password_hash: %q
    - name: bob
      password_hash: %q
  grants:
    - principals: [bob]
      actions: [read, publish, stats]
      streams: ["*"]
    - principals: [alice]
      actions: [read]
      streams: ["t"]
`, hashes[0], hashes[1]), nil
})

func basicAuth(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}

// cpuSeconds is the CPU time the server has used, user and system, from
// /proc/<pid>/stat.
func (s *server) cpuSeconds() float64 {
	s.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid))
	if err != nil {
		s.t.Fatalf("read the server's CPU time: %v", err)
	}
	// The command name may hold spaces; the fields after it are fixed.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // clock ticks; USER_HZ is 100 on Linux
}

// burst opens n connections, writes one request on each with the
// Authorization header auth(i) before reading any answer, and returns
// the statuses, in no order.
func burst(t testing.TB, addr string, n int, path string, auth func(i int) string) []int {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		defer c.Close()
		conns[i] = c
	}
	for i, c := range conns {
		req := "GET " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: " + auth(i) + "\r\n\r\n"
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				statuses[i] = -1
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	return statuses
}

// countStatuses words a list of statuses as "401×4 429×146".
func countStatuses(statuses []int) string {
	n := map[int]int{}
	for _, s := range statuses {
		n[s]++
	}
	var keys []int
	for k := range n {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d×%d", k, n[k]))
	}
	return strings.Join(parts, " ")
}

// pacedPublisher publishes one row per frame at a fixed rate as bob, and
// records when each acknowledgement came and how long after its frame.
type pacedPublisher struct {
	mu   sync.Mutex
	acks []paceAck // in the order they came
	errs int

	began, ended time.Time // the first frame's time and run's return
}

type paceAck struct {
	at  time.Time
	lat time.Duration
}

// run publishes rate frames a second until stop is closed, then waits
// for the acknowledgements owed.
func (p *pacedPublisher) run(t testing.TB, s *server, rate int, stop <-chan struct{}) {
	t.Helper()
	h := http.Header{"Authorization": {basicAuth("bob", bobPW)}}
	ws, _, err := dialer(0).Dial(s.url("/t?publish"), h)
	if err != nil {
		t.Errorf("bob's publisher: %v", err)
		return
	}
	defer ws.Close()
	if _, _, err := ws.ReadMessage(); err != nil { // the greeting
		t.Errorf("bob's publisher: no greeting: %v", err)
		return
	}
	sent := make(chan time.Time, 4*rate)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for at := range sent {
			_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			now := time.Now()
			var r struct {
				Error string `json:"error"`
			}
			_ = json.Unmarshal(msg, &r)
			p.mu.Lock()
			if r.Error != "" {
				p.errs++
			} else {
				p.acks = append(p.acks, paceAck{at: now, lat: now.Sub(at)})
			}
			p.mu.Unlock()
		}
	}()
	interval := time.Second / time.Duration(rate)
	p.began = time.Now()
	for i := 0; ; i++ {
		select {
		case <-stop:
		case <-time.After(time.Until(p.began.Add(time.Duration(i) * interval))):
			sent <- time.Now()
			frame := fmt.Sprintf(`[{"id":"bob-%d","pad":%q}]`, i, pad)
			if err := ws.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
				t.Errorf("bob's publisher: %v", err)
				break
			}
			continue
		}
		break
	}
	close(sent)
	<-done
	p.ended = time.Now()
}

// window returns the rows acknowledged from from to to, a second, and
// the 99th percentile of their acknowledgements' latency.
func (p *pacedPublisher) window(from, to time.Time) (rate float64, p99 time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var lats []time.Duration
	for _, a := range p.acks {
		if !a.at.Before(from) && !a.at.After(to) {
			lats = append(lats, a.lat)
		}
	}
	if len(lats) == 0 {
		return 0, 0
	}
	slices.Sort(lats)
	return float64(len(lats)) / to.Sub(from).Seconds(), lats[len(lats)*99/100]
}

// TestConcurrentBadLoginsCostTheServerBoundedCPU sends 150 wrong passwords
// for one user, and then 150 unknown user names, from one address, each on
// its own connection and all written before any answer is read, while bob
// publishes 1,000 rows a second. The hashes are at cost 12. Each burst
// costs the server at most a few bcrypt comparisons (the free attempts
// and the one that starts the backoff): at most 2 CPU-seconds, where an
// unbounded check ran all 150. The rest get 429 at once. bob's publisher
// keeps at least 90% of its rate: the rows acknowledged during the
// attack, a second, against its rate before the attack. The 99th
// percentile of its acknowledgements' latency must stay within 50 ms, or
// four times its quiet p99 on a box busy enough to exceed that without
// an attack, under STREAMCAST_SOAK=full; it is logged otherwise. bob, another user behind the same
// address, is not locked out, and alice's own password works once her
// backoff ends.
func TestConcurrentBadLoginsCostTheServerBoundedCPU(t *testing.T) {
	t.Parallel() // its own server process; see TestMain
	s := start(t, options{extra: authYAML(t)})
	const rate = 1000

	// Its rate without the attack: 3 s for the figure, 1 s otherwise, as
	// the README's test run is short.
	var quiet pacedPublisher
	quiet.run(t, s, rate, timeAfter(time.Duration(testkit.SoakCount(1, 3))*time.Second))
	quietRate, quietP99 := quiet.window(quiet.began, quiet.ended)

	var attacked pacedPublisher
	stop, pubDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(pubDone)
		attacked.run(t, s, rate, stop)
	}()
	// The attack begins once the publisher's acknowledgements flow.
	waitUntil(t, 10*time.Second, func() (bool, string) {
		r, _ := attacked.window(time.Now().Add(-500*time.Millisecond), time.Now())
		return r > 0, "bob's publisher has no acknowledgement yet"
	})
	from := time.Now()
	cpu0 := s.cpuSeconds()
	wrong := burst(t, s.addr, 150, "/stats", func(i int) string { return basicAuth("alice", fmt.Sprintf("guess%d", i)) })
	cpu1 := s.cpuSeconds()
	unknown := burst(t, s.addr, 150, "/stats", func(i int) string { return basicAuth(fmt.Sprintf("user%d", i), "guess") })
	cpu2 := s.cpuSeconds()
	to := time.Now()
	close(stop)
	<-pubDone
	attackedRate, attackedP99 := attacked.window(from, to)

	t.Logf("150 wrong passwords for alice: %s, server CPU %.2f s; 150 unknown users: %s, server CPU %.2f s", countStatuses(wrong), cpu1-cpu0, countStatuses(unknown), cpu2-cpu1)
	t.Logf("bob's publisher at %d rows/s: %.0f rows/s, ack p99 %v without the attack; %.0f rows/s (%.0f%%), ack p99 %v during its %v",
		rate, quietRate, quietP99.Round(10*time.Microsecond), attackedRate, 100*attackedRate/max(quietRate, 1), attackedP99.Round(10*time.Microsecond), to.Sub(from).Round(time.Millisecond))
	for name, cpu := range map[string]float64{"wrong passwords": cpu1 - cpu0, "unknown users": cpu2 - cpu1} {
		if cpu > 2 {
			t.Errorf("the server used %.2f CPU-seconds for 150 %s; want at most 2", cpu, name)
		}
	}
	if attackedRate < 0.9*quietRate {
		t.Errorf("bob's publisher: %.0f rows/s during the attack, %.0f%% of its %.0f rows/s before; want at least 90%%", attackedRate, 100*attackedRate/quietRate, quietRate)
	}
	// The p99 follows the box as much as the attack: on a machine that
	// gives the publisher a p99 of 30 ms without any attack (CI, running
	// the other suites beside this one), 50 ms says nothing about bcrypt.
	// So the bound is 50 ms or four times the quiet p99, whichever is
	// larger: a stall behind bcrypt (324 ms against 15 ms quiet, with the
	// backoff check removed) fails either way.
	if limit := max(50*time.Millisecond, 4*quietP99); attackedP99 > limit && testkit.SoakFull() {
		t.Errorf("bob's publisher: ack p99 %v during the attack, %v without it; want at most %v", attackedP99, quietP99, limit)
	}
	for name, st := range map[string][]int{"wrong passwords": wrong, "unknown users": unknown} {
		if n := strings.Count(countStatuses(st), "401"); n == 0 {
			t.Errorf("%s: %s; want the first few checked (401)", name, countStatuses(st))
		}
		checked := 0
		for _, c := range st {
			switch c {
			case http.StatusUnauthorized:
				checked++
			case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			default:
				t.Errorf("%s: an answer %d; want 401, 429 or 503", name, c)
			}
		}
		if checked > 4 {
			t.Errorf("%s: %d of 150 were checked with bcrypt (401); want at most 4 (3 free and the one that starts the backoff)", name, checked)
		}
	}
	if attacked.errs > 0 || quiet.errs > 0 {
		t.Errorf("bob's publisher got %d error replies", attacked.errs+quiet.errs)
	}

	// bob, behind the same address, logs in at once: another user's
	// backoff does not hold him.
	if st := burst(t, s.addr, 1, "/stats", func(int) string { return basicAuth("bob", bobPW) }); st[0] != http.StatusOK {
		t.Errorf("bob's /stats right after the attack: %d, want 200", st[0])
	}
	// alice's right password waits out her backoff (at most the first
	// step's 250 ms here, as the burst started one), then passes.
	waitUntil(t, 5*time.Second, func() (bool, string) {
		st := burst(t, s.addr, 1, "/t", func(int) string { return basicAuth("alice", alicePW) })
		return st[0] == http.StatusBadRequest || st[0] == http.StatusNotFound || st[0] == http.StatusOK,
			fmt.Sprintf("alice's right password from the attacked address: HTTP %d", st[0])
	})
}

// timeAfter is a channel closed after d.
func timeAfter(d time.Duration) <-chan struct{} {
	c := make(chan struct{})
	time.AfterFunc(d, func() { close(c) })
	return c
}

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
)

// The users of the authenticated servers: alice is guessed at, bob
// publishes. Their hashes are at bcrypt's default cost of 12, what
// `streamcast auth hash` writes, so each comparison costs what it costs in
// production.
const (
	alicePW = "alice-Correct-horse"
	bobPW   = "bob-Battery-staple"
)

// authYAML is an auth: section over alice and bob at cost 12: bob may do
// everything, alice may read.
func authYAML(t testing.TB) string {
	t.Helper()
	hash := func(pw string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
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
`, hash(alicePW), hash(bobPW))
}

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

// pacedPublisher publishes one row per frame at rate frames a second as
// bob, and records each frame's ack latency.
type pacedPublisher struct {
	mu   sync.Mutex
	lats []time.Duration
	errs int
}

// run publishes for d and returns the acks it got.
func (p *pacedPublisher) run(t testing.TB, s *server, rate int, d time.Duration) {
	t.Helper()
	h := http.Header{"Authorization": {basicAuth("bob", bobPW)}}
	ws, _, err := dialer(0).Dial(s.url("/t?publish"), h)
	if err != nil {
		t.Fatalf("bob's publisher: %v", err)
	}
	defer ws.Close()
	if _, _, err := ws.ReadMessage(); err != nil { // the greeting
		t.Fatalf("bob's publisher: no greeting: %v", err)
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
			var r struct {
				Error string `json:"error"`
			}
			_ = json.Unmarshal(msg, &r)
			p.mu.Lock()
			if r.Error != "" {
				p.errs++
			} else {
				p.lats = append(p.lats, time.Since(at))
			}
			p.mu.Unlock()
		}
	}()
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := 0; ; i++ {
		next := start.Add(time.Duration(i) * interval)
		if next.Sub(start) >= d {
			break
		}
		time.Sleep(time.Until(next))
		sent <- time.Now()
		frame := fmt.Sprintf(`[{"id":"bob-%d","pad":%q}]`, i, pad)
		if err := ws.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
			t.Errorf("bob's publisher: %v", err)
			break
		}
	}
	close(sent)
	<-done
}

// figures returns the acks and their p99.
func (p *pacedPublisher) figures() (acks int, p99 time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := slices.Clone(p.lats)
	slices.Sort(l)
	if len(l) == 0 {
		return 0, 0
	}
	return len(l), l[len(l)*99/100]
}

// TestConcurrentBadLoginsCostTheServerBoundedCPU sends 150 wrong passwords
// for one user, and then 150 unknown user names, from one address, each on
// its own connection and all written before any answer is read, while bob
// publishes 1,000 rows a second. Each burst costs the server at most a
// few bcrypt comparisons (the free attempts and the one that starts the
// backoff): at most 2 CPU-seconds, where an unbounded check ran all 150.
// The rest get 429 at once. bob, another user behind the same address, is
// not locked out, and alice's own password works once her backoff ends.
func TestConcurrentBadLoginsCostTheServerBoundedCPU(t *testing.T) {
	t.Parallel() // its own server process; see TestMain
	s := start(t, options{extra: authYAML(t)})
	const rate, phase = 1000, 3 * time.Second

	var quiet pacedPublisher
	quiet.run(t, s, rate, phase)

	var attacked pacedPublisher
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		attacked.run(t, s, rate, phase)
	}()
	cpu0 := s.cpuSeconds()
	wrong := burst(t, s.addr, 150, "/stats", func(i int) string { return basicAuth("alice", fmt.Sprintf("guess%d", i)) })
	unknown := burst(t, s.addr, 150, "/stats", func(i int) string { return basicAuth(fmt.Sprintf("user%d", i), "guess") })
	cpu := s.cpuSeconds() - cpu0
	<-pubDone

	t.Logf("150 wrong passwords for alice: %s; 150 unknown users: %s; server CPU for both bursts %.2f s", countStatuses(wrong), countStatuses(unknown), cpu)
	qn, qp99 := quiet.figures()
	an, ap99 := attacked.figures()
	t.Logf("bob's publisher at %d rows/s over %v: %d acks, p99 %v without the attack; %d acks, p99 %v during it (%.0f%% of its rate)",
		rate, phase, qn, qp99, an, ap99, 100*float64(an)/float64(max(qn, 1)))
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
	if cpu > 2 {
		t.Errorf("the server used %.2f CPU-seconds for 300 bad logins; want at most 2", cpu)
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

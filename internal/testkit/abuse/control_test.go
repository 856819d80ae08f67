package abuse

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/crypto/bcrypt"

	"github.com/streamcast/streamcast/internal/testkit"
)

// The control API's attacks: a user who may control some streams reading
// the names of others from list cursors, names that differ only in case,
// and no-op requests growing the registry.

// ctlPW is the password of the control tests' users, ops and dev.
const ctlPW = "ctl-Correct-horse"

// ctlServer is a serve process with a control: section over a registry
// `streamcast control init` made, as an operator sets it up.
type ctlServer struct {
	*server
	root     string
	registry string
}

// startControl makes the registry and serves it; auth adds an auth:
// section in which ops may control every stream and dev only dev.*;
// maintain runs the maintenance children. Request bodies may be up to
// control.max_bytes' default, 256 KiB.
func startControl(t testing.TB, auth, maintain bool) *ctlServer {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "data")
	registry := filepath.Join(dir, "registry.db")
	section := fmt.Sprintf("control:\n  registry: %s\n  profiles:\n    local: {root: %s}\n", registry, filepath.Join(dir, "registered"))
	initCfg := filepath.Join(dir, "init.yaml")
	if err := os.WriteFile(initCfg, []byte("root: "+root+"\n"+section), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(exe, "control", "init", "--config", initCfg).CombinedOutput(); err != nil {
		t.Fatalf("streamcast control init: %v\n%s", err, out)
	}
	extra := section
	if auth {
		h, err := bcrypt.GenerateFromPassword([]byte(ctlPW), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		extra += fmt.Sprintf(`auth:
  users:
    - name: ops
      password_hash: %q
    - name: dev
      password_hash: %q
  grants:
    - principals: [ops]
      actions: [control, read, publish, stats]
      streams: ["*"]
    - principals: [dev]
      actions: [control]
      streams: ["dev.*"]
`, h, h)
	}
	return &ctlServer{server: start(t, options{root: root, extra: extra, maintain: maintain}), root: root, registry: registry}
}

// ctlAnswer is one answer of the control API, read whole.
type ctlAnswer struct {
	status int
	hdr    http.Header
	body   []byte
}

// code is the refusal's error code, "" for an answer that is none.
func (a ctlAnswer) code() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(a.body, &e)
	return e.Error.Code
}

// ctlKeys numbers idempotency keys: every mutation is a new request.
var ctlKeys atomic.Int64

// do sends one request as user ("" for none); pre is the mutation's
// precondition ("*" for If-None-Match: *, "" for none, else If-Match).
func (s *ctlServer) do(t testing.TB, user, method, path, body, pre string) ctlAnswer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+s.addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, ctlPW)
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("abuse-%d", ctlKeys.Add(1)))
		switch pre {
		case "":
		case "*":
			req.Header.Set("If-None-Match", "*")
		default:
			req.Header.Set("If-Match", pre)
		}
	}
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", method, path, err)
	}
	return ctlAnswer{resp.StatusCode, resp.Header, b}
}

// ctlDecl is a declaration the local profile serves, its schema padded
// with a description to pad bytes (0: none).
func ctlDecl(pad int) string {
	desc := ""
	if pad > 0 {
		desc = `,"description":"` + strings.Repeat("x", pad) + `"`
	}
	return `{"schema":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]` + desc + `},"storage_profile":"local","initialization":"create_if_absent"}`
}

// create registers name as user and fails the test unless it is accepted.
func (s *ctlServer) create(t testing.TB, user, name, decl string) {
	t.Helper()
	if a := s.do(t, user, http.MethodPut, "/control/v1/streams/"+name, decl, "*"); a.status != http.StatusAccepted {
		t.Fatalf("create %s: %d %s", name, a.status, a.body)
	}
}

// TestControlListCursorsNameNoStreamTheCallerMayNotSee: dev may control
// dev.* only. Paging the list one stream at a time, every cursor dev is
// handed must name only streams dev sees (a cursor is base64 a client
// can read), and the pages must list all of dev's streams and nothing
// else.
func TestControlListCursorsNameNoStreamTheCallerMayNotSee(t *testing.T) {
	t.Parallel()
	s := startControl(t, true, false)
	for _, n := range []string{"acquisition-target-zeta", "dev.a", "dev.b", "merger-omega", "dev.c", "zz-board-only"} {
		s.create(t, "ops", n, ctlDecl(0))
	}
	visible := map[string]bool{"dev.a": true, "dev.b": true, "dev.c": true}
	var listed []string
	path := "/control/v1/streams?limit=1"
	for pages := 0; path != ""; pages++ {
		if pages > 10 {
			t.Fatalf("dev's list did not end after 10 pages: %v", listed)
		}
		a := s.do(t, "dev", http.MethodGet, path, "", "")
		if a.status != http.StatusOK {
			t.Fatalf("GET %s as dev: %d %s", path, a.status, a.body)
		}
		var page struct {
			Streams []struct {
				Name string `json:"name"`
			} `json:"streams"`
			NextCursor *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(a.body, &page); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, a.body)
		}
		for _, st := range page.Streams {
			listed = append(listed, st.Name)
		}
		path = ""
		if page.NextCursor != nil {
			cur := *page.NextCursor
			if b, err := base64.RawURLEncoding.DecodeString(cur); err == nil {
				for _, hidden := range []string{"acquisition-target-zeta", "merger-omega", "zz-board-only"} {
					if bytes.Contains(b, []byte(hidden)) {
						t.Errorf("page %d: dev's next_cursor %q reads %q: it names %s, a stream dev may not see", pages+1, cur, b, hidden)
					}
				}
			}
			path = "/control/v1/streams?limit=1&cursor=" + cur
		}
	}
	for _, n := range listed {
		if !visible[n] {
			t.Errorf("dev's list holds %s, which dev may not see", n)
		}
	}
	if got := strings.Join(listed, ","); got != "dev.a,dev.b,dev.c" {
		t.Errorf("dev's pages list %s; want dev.a,dev.b,dev.c", got)
	}
}

// TestControlRefusesNamesThatDifferOnlyInCase: the config loader refuses
// two streams whose names differ only in case, as they would share a
// directory on a case-insensitive file system; the control API must
// refuse them too, against its own streams and the config's ("t").
func TestControlRefusesNamesThatDifferOnlyInCase(t *testing.T) {
	t.Parallel()
	s := startControl(t, false, false)
	s.create(t, "", "c.one", ctlDecl(0))
	for _, c := range []struct{ name, clash string }{{"c.One", "c.one"}, {"C.ONE", "c.one"}, {"T", "t"}} {
		a := s.do(t, "", http.MethodPut, "/control/v1/streams/"+c.name, ctlDecl(0), "*")
		switch {
		case a.status != http.StatusConflict && a.status != http.StatusUnprocessableEntity:
			t.Errorf("create %s beside %s: %d %s; want a 409 or 422 refusal", c.name, c.clash, a.status, a.body)
		case !strings.Contains(string(a.body), `\"`+c.clash+`\"`):
			t.Errorf("create %s: %d %s; the refusal should name %s, the stream it clashes with", c.name, a.status, a.body, c.clash)
		}
	}
	a := s.do(t, "", http.MethodGet, "/control/v1/streams", "", "")
	if strings.Contains(string(a.body), `"c.One"`) || strings.Contains(string(a.body), `"C.ONE"`) || strings.Contains(string(a.body), `"T"`) {
		t.Errorf("the registry holds a name that differs only in case from another: %s", a.body)
	}
	// A name that differs in more than case is still taken.
	s.create(t, "", "c.one2", ctlDecl(0))
}

// registryBytes is the registry's size on disk: the database, and its
// WAL, which SQLite reuses from its start once it has checkpointed about
// 4 MiB (1,000 pages), so it does not grow past that.
func registryBytes(t testing.TB, path string) (db, wal int64) {
	t.Helper()
	size := func(p string) int64 {
		fi, err := os.Stat(p)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	return size(path), size(path + "-wal")
}

// TestControlNoOpRequestsDoNotGrowTheRegistry: 500 PUTs of a stream's
// own 240 KB declaration, each under a new idempotency key, change
// nothing; the registry (and serve's memory) must not grow by what they
// carried. The registry may keep a receipt per request (a few hundred
// bytes each), never the declaration again.
func TestControlNoOpRequestsDoNotGrowTheRegistry(t *testing.T) {
	t.Parallel()
	const declBytes = 240 << 10
	n := testkit.SoakCountShort(30, 50, 500) // 50 already carry 12 MB, twice the bound
	s := startControl(t, false, false)
	decl := ctlDecl(declBytes)
	s.create(t, "", "big", decl)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		a := s.do(t, "", http.MethodGet, "/control/v1/streams/big", "", "")
		return !strings.Contains(string(a.body), `"status":"accepted"`) && !strings.Contains(string(a.body), `"status":"running"`), "the create is still pending: " + string(a.body[:min(len(a.body), 200)])
	})
	db0, wal0 := registryBytes(t, s.registry)
	rss0 := s.rss()
	start := time.Now()
	for i := 0; i < n; i++ {
		a := s.do(t, "", http.MethodPut, "/control/v1/streams/big", decl, `"1"`)
		if a.status != http.StatusOK {
			t.Fatalf("no-op PUT %d: %d %s; want 200", i, a.status, a.body)
		}
	}
	took := time.Since(start)
	db1, wal1 := registryBytes(t, s.registry)
	rss1 := s.rss()
	t.Logf("%d no-op PUTs of a %d KiB declaration in %v (%.1f ms each): registry database %.2f → %.2f MiB, its WAL %.2f → %.2f MiB, RSS %.1f → %.1f MiB",
		n, declBytes>>10, took.Round(time.Millisecond), float64(took.Microseconds())/1000/float64(n),
		mib(db0), mib(db1), mib(wal0), mib(wal1), mib(rss0), mib(rss1))
	// A receipt is a few hundred bytes; a kilobyte a request is generous,
	// and a 240 KB declaration kept per request is 240 times that. The
	// WAL is allowed its checkpoint size and a margin.
	if grew := (db1 + wal1) - (db0 + wal0); grew > int64(n)<<10+6<<20 {
		t.Errorf("%d no-op PUTs grew the registry by %.1f MiB (%.0f bytes each); a no-op must store no more than its receipt",
			n, mib(grew), float64(grew)/float64(n))
	}
}

// waitOperation polls the operation a 202 names until it ends, and fails
// the test unless it succeeded.
func (s *ctlServer) waitOperation(t testing.TB, a ctlAnswer) {
	t.Helper()
	loc := a.hdr.Get("Location")
	deadline := time.Now().Add(60 * time.Second)
	for {
		op := s.do(t, "", http.MethodGet, loc, "", "")
		switch {
		case bytes.Contains(op.body, []byte(`"status":"succeeded"`)):
			return
		case bytes.Contains(op.body, []byte(`"status":"failed"`)):
			t.Fatalf("operation %s failed: %s", loc, op.body)
		case time.Now().After(deadline):
			t.Fatalf("operation %s not finished after 60s: %s", loc, op.body)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// childPIDs are the maintenance children's pids by role, from /stats.
func (s *ctlServer) childPIDs() map[string]int {
	out := map[string]int{}
	for _, c := range s.stats().Children {
		if c.PID != nil {
			out[c.Role] = *c.PID
		}
	}
	return out
}

// TestControlStartingAStreamLeavesTheMaintenanceChildrenRunning: with 50
// registered streams served and the maintenance children running over
// their logs, starting one more must not restart the children over every
// log (which costs seconds per start and grows with the streams served):
// the children running before a start still run after it, and a start
// takes well under a second. It logs the time per start, median and
// slowest.
func TestControlStartingAStreamLeavesTheMaintenanceChildrenRunning(t *testing.T) {
	t.Parallel()
	n := testkit.SoakCountShort(10, 20, 50) // 50 (the figure's count) at full
	s := startControl(t, false, true)
	names := make([]string, n+5)
	for i := range names {
		names[i] = fmt.Sprintf("s%03d", i)
		a := s.do(t, "", http.MethodPut, "/control/v1/streams/"+names[i], ctlDecl(0), "*")
		if a.status != http.StatusAccepted {
			t.Fatalf("create %s: %d %s", names[i], a.status, a.body)
		}
		s.waitOperation(t, a)
	}
	startOne := func(name string) time.Duration {
		t0 := time.Now()
		a := s.do(t, "", http.MethodPut, "/control/v1/streams/"+name+"/desired", `{"state":"serving"}`, `"1"`)
		if a.status != http.StatusAccepted {
			t.Fatalf("start %s: %d %s", name, a.status, a.body)
		}
		s.waitOperation(t, a)
		return time.Since(t0)
	}
	for _, name := range names[:n] {
		startOne(name)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		for _, c := range s.stats().Children {
			if !c.Ready {
				return false, "child " + c.Role + " is not ready"
			}
		}
		return true, ""
	})
	// The starts measured: at n streams served, one more each.
	var took []time.Duration
	restarted := 0
	for _, name := range names[n:] {
		before := s.childPIDs()
		took = append(took, startOne(name))
		after := s.childPIDs()
		for role, pid := range before {
			if after[role] != pid {
				restarted++
				if restarted <= 3 {
					t.Errorf("starting %s restarted the %s child (pid %d, now %d); a start should touch only the new stream's logs", name, role, pid, after[role])
				}
			}
		}
	}
	if restarted > 3 {
		t.Errorf("and %d more children restarted", restarted-3)
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	t.Logf("starting a stream beside %d served, %d times: median %v, slowest %v (%v)",
		n, len(took), sorted[len(sorted)/2].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond), took)
	if med := sorted[len(sorted)/2]; med > 500*time.Millisecond {
		t.Errorf("a start takes %v (median) beside %d streams; it should not restart the maintenance children over every log", med, n)
	}

	// The children running took the last stream's log: rows published
	// to it are sealed and published by them.
	last := names[len(names)-1]
	ws, _ := subscribe(t, s.server, "/"+last+"?publish", 0)
	defer ws.Close()
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`[{"id":1},{"id":2},{"id":3}]`)); err != nil {
		t.Fatalf("publish to %s: %v", last, err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, msg, err := ws.ReadMessage(); err != nil || !bytes.Contains(msg, []byte(`"ok"`)) {
		t.Fatalf("publish to %s: %s %v", last, msg, err)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		var st struct {
			Streams []struct {
				Name             string `json:"name"`
				PublishedThrough *int64 `json:"published_through"`
			} `json:"streams"`
		}
		a := s.do(t, "", http.MethodGet, "/stats", "", "")
		if err := json.Unmarshal(a.body, &st); err != nil {
			return false, fmt.Sprintf("/stats: %v", err)
		}
		for _, x := range st.Streams {
			if x.Name == last {
				return x.PublishedThrough != nil && *x.PublishedThrough >= 3, fmt.Sprintf("stream %s: published through %v, not yet 3: the maintenance children do not maintain its log", last, x.PublishedThrough)
			}
		}
		return false, "stream " + last + " is not in /stats"
	})
}

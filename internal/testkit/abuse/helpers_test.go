package abuse

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit"
)

// binaryEnv names a prebuilt streamcast binary to attack instead of
// building one (to compare a build from another commit, say).
const binaryEnv = "STREAMCAST_ABUSE_BINARY"

// exe is the streamcast binary the tests run; set once by TestMain.
//
// Every test runs in parallel with the others: each attacks a serve
// process of its own and measures that process (its descriptors, its
// memory, its log), never this one's, and most of their time is waiting
// for a timeout or a grace to pass (the handshake timeout alone is 10 s).
var exe string

func TestMain(m *testing.M) {
	dir := ""
	exe = os.Getenv(binaryEnv)
	if exe == "" {
		var err error
		dir, err = os.MkdirTemp("", "streamcast-abuse-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if exe, err = testkit.BuildStreamcast(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			_ = os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}

// options shape the server a test attacks. It serves one durable,
// schema-less stream "t" with unbounded replay.
type options struct {
	maxBacklog int    // limits.max_backlog; 0 = the default
	maintain   bool   // run the maintenance children, with short intervals
	root       string // data root; "" = a temporary directory
	// limits is YAML lines under limits: ("  max_connections: 10\n"), beside
	// maxBacklog's.
	limits string
	// nofile > 0 runs the server under ulimit -n nofile (soft and hard).
	nofile int
	// streams, when set, is the streams: section's items in place of the
	// one stream "t".
	streams string
	// extra is YAML appended to the config as written, for sections the
	// fields above do not cover (auth:, control:, a second stream, …);
	// its top-level keys must not repeat the ones start writes.
	extra string
}

// server is a `streamcast serve` process.
type server struct {
	t    testing.TB
	cmd  *exec.Cmd
	pid  int
	addr string
	cfg  string // the config file, for tests that rewrite it and reload
	logs *testkit.SyncBuffer
	done chan struct{}
}

// start runs the server until the test ends; it fails the test when the
// server is not serving within 30 s.
func start(t testing.TB, o options) *server {
	t.Helper()
	dir := t.TempDir()
	root := o.root
	if root == "" {
		root = filepath.Join(dir, "data")
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "listen: 127.0.0.1:0\nroot: %s\n", root)
	if o.maxBacklog > 0 || o.limits != "" {
		cfg.WriteString("limits:\n")
		if o.maxBacklog > 0 {
			fmt.Fprintf(&cfg, "  max_backlog: %d\n", o.maxBacklog)
		}
		cfg.WriteString(o.limits)
	}
	if o.streams != "" {
		cfg.WriteString("streams:\n" + o.streams)
	} else {
		cfg.WriteString("streams:\n  - name: t\n    durable: true\n    max_replay: null\n")
	}
	if o.maintain {
		cfg.WriteString("maintain:\n  seal_every: 100ms\n  compact_every: 1s\n  publish_every: 1s\n  clean_every: 1s\n  clean_published_every: 2s\n  flush_every: 2s\n")
	}
	cfg.WriteString("log:\n  level: debug\n")
	cfg.WriteString(o.extra)
	cfgFile := filepath.Join(dir, "streamcast.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	addrFile := filepath.Join(dir, "addr")
	args := []string{"serve", "--config", cfgFile, "--addr-file", addrFile}
	if !o.maintain {
		args = append(args, "--no-maintain")
	}
	s := &server{t: t, cfg: cfgFile, logs: &testkit.SyncBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(exe, args...)
	if o.nofile > 0 {
		// exec keeps the shell's pid, so s.pid is the server's.
		s.cmd = exec.Command("/bin/sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, o.nofile), exe}, args...)...)
	}
	s.cmd.Stderr = s.logs
	s.cmd.Stdout = s.logs
	// The server dies with the test binary, whatever ends it.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.pid = s.cmd.Process.Pid
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(addrFile); err == nil && len(bytes.TrimSpace(b)) > 0 {
			s.addr = string(bytes.TrimSpace(b))
			return s
		}
		select {
		case <-s.done:
			t.Fatalf("streamcast serve exited: %s", s.logs)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("streamcast serve not serving after 30s: %s", s.logs)
		}
	}
}

// stop ends the server: SIGTERM (SIGCONT first, in case a test stopped
// it), then SIGKILL after 20 s.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		s.t.Errorf("streamcast serve did not stop within 20s of SIGTERM; killing it")
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func (s *server) url(path string) string { return "ws://" + s.addr + path }

// rss is the server's resident set size in bytes, from /proc.
func (s *server) rss() int64 {
	s.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid))
	if err != nil {
		s.t.Fatalf("read the server's RSS: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kib, _ := strconv.ParseInt(f[1], 10, 64)
			return kib << 10
		}
	}
	s.t.Fatal("no VmRSS in /proc/<pid>/status")
	return 0
}

// fds is the number of file descriptors the server holds.
func (s *server) fds() int {
	s.t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.pid))
	if err != nil {
		s.t.Fatalf("list the server's descriptors: %v", err)
	}
	return len(ents)
}

// fdList names what the server's descriptors point at, for messages.
func (s *server) fdList() string {
	dir := fmt.Sprintf("/proc/%d/fd", s.pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		out = append(out, e.Name()+"→"+filepath.Base(target))
	}
	return strings.Join(out, " ")
}

// stats is the part of /stats the tests read.
type stats struct {
	Process struct {
		Goroutines int   `json:"goroutines"`
		RSSBytes   int64 `json:"rss_bytes"`
	} `json:"process"`
	Streams []struct {
		Name        string `json:"name"`
		EndOffset   *int64 `json:"end_offset"`
		Subscribers int64  `json:"subscribers"`
	} `json:"streams"`
	Children []struct {
		Role     string `json:"role"`
		PID      *int   `json:"pid"`
		Ready    bool   `json:"ready"`
		Restarts int    `json:"restarts"`
	} `json:"children"`
}

func (s *server) stats() stats {
	s.t.Helper()
	var st stats
	if err := json.Unmarshal([]byte(s.statsText()), &st); err != nil {
		s.t.Fatalf("GET /stats: %v", err)
	}
	return st
}

// statsText is the server's /stats, as text.
func (s *server) statsText() string {
	s.t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + s.addr + "/stats")
	if err != nil {
		s.t.Fatalf("GET /stats: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("GET /stats: %v", err)
	}
	return string(b)
}

// waitUntil polls cond every 20 ms until it holds, failing the test after
// timeout with what cond last reported.
func waitUntil(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// bound is what a test allows the server to grow by.
type bound struct {
	rss int64 // bytes over the baseline
	fds int   // descriptors over the baseline
}

// baseline is the server's RSS and descriptors at a quiet moment.
type baseline struct {
	rss int64
	fds int
}

func (s *server) baseline() baseline { return baseline{rss: s.rss(), fds: s.fds()} }

// within fails the test when the server has grown past b + limit.
func (s *server) within(what string, b baseline, limit bound) {
	s.t.Helper()
	rss, fds := s.rss(), s.fds()
	s.t.Logf("%s: RSS %.1f MiB (baseline %.1f), %d FDs (baseline %d)", what, mib(rss), mib(b.rss), fds, b.fds)
	if rss > b.rss+limit.rss {
		s.t.Errorf("%s: RSS %.1f MiB, over the baseline %.1f MiB + %.1f MiB", what, mib(rss), mib(b.rss), mib(limit.rss))
	}
	if fds > b.fds+limit.fds {
		s.t.Errorf("%s: %d FDs, over the baseline %d + %d", what, fds, b.fds, limit.fds)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// dialer connects WebSocket clients. rcvbuf > 0 shrinks the socket's
// receive buffer (a client that never reads then stalls the server soon).
func dialer(rcvbuf int) *websocket.Dialer {
	d := &websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	if rcvbuf > 0 {
		d.NetDialContext = (&net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			})
			if err != nil {
				return err
			}
			return serr
		}}).DialContext
	}
	return d
}

// subscribe connects a subscriber to path and reads its greeting.
func subscribe(t testing.TB, s *server, path string, rcvbuf int) (*websocket.Conn, greeting) {
	t.Helper()
	ws, _, err := dialer(rcvbuf).Dial(s.url(path), nil)
	if err != nil {
		t.Fatalf("subscribe %s: %v", path, err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, msg, err := ws.ReadMessage()
	if err != nil {
		ws.Close()
		t.Fatalf("subscribe %s: no greeting: %v", path, err)
	}
	_ = ws.SetReadDeadline(time.Time{})
	var g greeting
	if err := json.Unmarshal(msg, &g); err != nil {
		ws.Close()
		t.Fatalf("greeting %s: %v", msg, err)
	}
	return ws, g
}

// greeting is the part of the greeting the tests read.
type greeting struct {
	EndOffset int64     `json:"end_offset"`
	Replay    *[2]int64 `json:"replay"`
}

// frameOf parses a data frame [offset, ts, row] and returns its offset and
// the row's "id".
func frameOf(msg []byte) (int64, string, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(msg, &parts); err != nil || len(parts) != 3 {
		return 0, "", fmt.Errorf("data frame %.100s is not [offset,ts,row]", msg)
	}
	var off int64
	if err := json.Unmarshal(parts[0], &off); err != nil {
		return 0, "", fmt.Errorf("offset of %.100s: %w", msg, err)
	}
	var row struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(parts[2], &row); err != nil {
		return 0, "", fmt.Errorf("row of %.100s: %w", msg, err)
	}
	return off, row.ID, nil
}

// pad makes a row about 100 bytes, the size of a typical trade.
const pad = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123"

// load is publishers sending rows until stopped; it records every row the
// server acknowledged, by offset.
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	acked  map[int64]string // offset → the id of the row acknowledged there
	failed int              // frames answered with an error
	errs   []string         // distinct error details
}

// startLoad runs n publishers sending frames of batch rows, up to 16
// unanswered each, until stop.
func startLoad(t testing.TB, s *server, n, batch int) *load {
	t.Helper()
	return startPacedLoad(t, s, n, batch, 0)
}

// startPacedLoad is startLoad with each publisher sending at most one
// frame every pace (0: as fast as the server answers), for tests whose
// property is not throughput and whose rounds last long enough that an
// unpaced load would pile up millions of rows to check.
func startPacedLoad(t testing.TB, s *server, n, batch int, pace time.Duration) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel, acked: map[int64]string{}}
	for k := 0; k < n; k++ {
		ws, _ := subscribe(t, s, "/t?publish", 0)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.publish(ctx, ws, fmt.Sprintf("p%d", k), batch, pace)
		}()
	}
	t.Cleanup(l.stop)
	return l
}

// publish pipelines frames on ws until ctx ends, then waits (bounded) for
// the replies owed.
func (l *load) publish(ctx context.Context, ws *websocket.Conn, name string, batch int, pace time.Duration) {
	defer ws.Close()
	sent := make(chan []string, 16)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for ids := range sent {
			_ = ws.SetReadDeadline(time.Now().Add(60 * time.Second))
			_, msg, err := ws.ReadMessage()
			if err != nil {
				for range sent { // drain: the sender stops on its own
				}
				return
			}
			var r struct {
				OK     []*int64 `json:"ok"`
				Error  string   `json:"error"`
				Detail string   `json:"detail"`
			}
			_ = json.Unmarshal(msg, &r)
			l.mu.Lock()
			if r.Error != "" {
				l.failed++
				if len(l.errs) < 8 && !contains(l.errs, r.Detail) {
					l.errs = append(l.errs, r.Error+": "+r.Detail)
				}
			}
			for i, o := range r.OK {
				if o != nil && i < len(ids) {
					l.acked[*o] = ids[i]
				}
			}
			l.mu.Unlock()
		}
	}()
	var tick <-chan time.Time
	if pace > 0 {
		ticker := time.NewTicker(pace)
		defer ticker.Stop()
		tick = ticker.C
	}
	var b strings.Builder
	for seq := 0; ctx.Err() == nil; {
		if tick != nil {
			select {
			case <-tick:
			case <-ctx.Done():
				continue // the loop ends on ctx
			}
		}
		ids := make([]string, batch)
		b.Reset()
		b.WriteByte('[')
		for i := range ids {
			ids[i] = name + "-" + strconv.Itoa(seq)
			seq++
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":%q,"pad":%q}`, ids[i], pad)
		}
		b.WriteByte(']')
		// Once the reader expects a reply to ids, the frame must go out.
		select {
		case sent <- ids:
		case <-ctx.Done():
			close(sent)
			<-readDone
			return
		case <-readDone:
			close(sent)
			return
		}
		_ = ws.SetWriteDeadline(time.Now().Add(60 * time.Second))
		if err := ws.WriteMessage(websocket.TextMessage, []byte(b.String())); err != nil {
			break
		}
	}
	close(sent)
	<-readDone
}

// stop ends the load and waits for its publishers.
func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
}

// count is the number of rows acknowledged so far.
func (l *load) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// failures is the number of frames answered with an error so far.
func (l *load) failures() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// errors is the distinct errors answered so far ("code: detail").
func (l *load) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.errs...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.HasSuffix(x, ": "+s) {
			return true
		}
	}
	return false
}

// verifyAcked replays the stream from its earliest row and fails the test
// for every acknowledged row the replay lacks or holds another row at.
func verifyAcked(t testing.TB, s *server, acked map[int64]string) {
	t.Helper()
	ws, g := subscribe(t, s, "/t?offset=0", 0)
	defer ws.Close()
	got := map[int64]string{}
	if g.Replay != nil {
		for next := g.Replay[0]; next < g.Replay[1]; {
			_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, msg, err := ws.ReadMessage()
			if err != nil {
				t.Fatalf("replay ended at %d of [%d, %d): %v", next, g.Replay[0], g.Replay[1], err)
			}
			off, id, err := frameOf(msg)
			if err != nil {
				t.Fatal(err)
			}
			got[off] = id
			next = off + 1
		}
	}
	lost := 0
	for off, id := range acked {
		if got[off] != id {
			if lost < 5 {
				t.Errorf("acknowledged row %s at offset %d; the replay has %q there", id, off, got[off])
			}
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged rows are not in the replay", lost, len(acked))
	}
	t.Logf("all %d acknowledged rows are in the replay of %d rows", len(acked)-lost, len(got))
}

// smallDisk mounts a tmpfs of size (as mount takes it: "8m") in a
// temporary directory until the test ends, and returns its path. The
// test is skipped, saying so, when it is not root or the mount fails.
// Call it before start: its cleanup then runs after the server stopped.
func smallDisk(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("filling a disk needs a small tmpfs, and mounting one needs root; run this test as root to include it")
	}
	mnt := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a %s tmpfs even as root (a container without CAP_SYS_ADMIN?): %v: %s", size, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	return mnt
}

// connRoom returns how many connections this test may open, want at
// most: the server (which inherits this process's descriptor limit) and
// the test each hold one descriptor per connection beside their own few
// hundred. The test is skipped when fewer than least fit.
func connRoom(t testing.TB, want, least int) int {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	n := min(want, int(lim.Cur)-512)
	if n < least {
		t.Skipf("the descriptor limit (%d) leaves room for only %d connections; raise ulimit -n", lim.Cur, n)
	}
	if n < want {
		t.Logf("the descriptor limit (%d) allows %d connections, not %d", lim.Cur, n, want)
	}
	return n
}

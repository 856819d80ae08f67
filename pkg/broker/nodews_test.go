//go:build unix

// unix: stall shrinks a socket's send buffer with setsockopt.

package broker

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/wire"
)

// This file runs node's ws (testdata/nodews/client.js) as the compressing
// client: a permessage-deflate implementation that is not streamcast's,
// inflating with history as browsers do. The package's other compression
// tests read with rawClient, whose inflater is pkg/wire's own.

// nodeWSDir is the harness: client.js and the ws package npm installs
// beside it.
const nodeWSDir = "testdata/nodews"

// nodeWSPath finds node and the harness's installed packages, or skips the
// test; with STREAMCAST_REQUIRE_NODE=1 (CI) a missing one fails it instead.
func nodeWSPath(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	msg := ""
	switch {
	case err != nil:
		msg = "node is not installed, so the node ws compression tests cannot run; install Debian's nodejs and npm packages (apt-get install nodejs npm), then run npm ci --prefix pkg/broker/testdata/nodews from the repository's root"
	default:
		if _, err := os.Stat(filepath.Join(nodeWSDir, "node_modules", "ws", "package.json")); err != nil {
			msg = "the node ws harness is not installed, so its compression tests cannot run; run npm ci --prefix pkg/broker/testdata/nodews from the repository's root"
		}
	}
	if msg == "" {
		return node
	}
	if os.Getenv("STREAMCAST_REQUIRE_NODE") == "1" {
		t.Fatal(msg + " (STREAMCAST_REQUIRE_NODE=1)")
	}
	t.Skip(msg)
	return ""
}

// nodeWS is one running client.js: the test sends it commands and reads
// its answers, one JSON line each.
type nodeWS struct {
	t      testing.TB
	stdin  io.WriteCloser
	events chan nodeEvent
	stderr *testkit.SyncBuffer
}

// nodeEvent is one line client.js writes.
type nodeEvent struct {
	Ev    string     `json:"ev"`
	Name  string     `json:"name"`
	Ext   string     `json:"ext"`
	Port  int        `json:"port"`
	Error string     `json:"error"`
	Count int        `json:"count"`
	Bytes int64      `json:"bytes"`
	Close *nodeClose `json:"close"`
	Rows  []string   `json:"rows"`
}

type nodeClose struct {
	Code   int    `json:"code"`
	Reason string `json:"reason"`
}

// startNodeWS starts client.js; it ends when the test does.
func startNodeWS(t testing.TB) *nodeWS {
	t.Helper()
	node := nodeWSPath(t)
	cmd := exec.Command(node, "client.js")
	cmd.Dir = nodeWSDir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	n := &nodeWS{t: t, stdin: stdin, events: make(chan nodeEvent, 16), stderr: &testkit.SyncBuffer{}}
	cmd.Stderr = n.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(n.events)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 64<<20) // a dump of every row a subscriber read
		for sc.Scan() {
			var ev nodeEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				ev = nodeEvent{Ev: "error", Error: fmt.Sprintf("unreadable line %q: %v", sc.Text(), err)}
			}
			n.events <- ev
		}
	}()
	t.Cleanup(func() {
		_ = stdin.Close() // client.js exits when its input ends
		done := make(chan struct{})
		go func() {
			for range n.events { // drain what it still says
			}
			<-read
			_ = cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return n
}

// do sends one command and returns client.js's answer to it.
func (n *nodeWS) do(cmd map[string]any, want string, timeout time.Duration) nodeEvent {
	n.t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := n.stdin.Write(append(b, '\n')); err != nil {
		n.t.Fatalf("node ws: %v\n%s", err, n.stderr)
	}
	select {
	case ev, ok := <-n.events:
		if !ok {
			n.t.Fatalf("node ws exited during %s:\n%s", b, n.stderr)
		}
		if ev.Ev != want || ev.Name != cmd["name"] {
			n.t.Fatalf("node ws answered %+v to %s", ev, b)
		}
		return ev
	case <-time.After(timeout):
		n.t.Fatalf("node ws did not answer %s within %v", b, timeout)
	}
	return nodeEvent{}
}

// open subscribes name to url, offering permessage-deflate when deflate
// is set, and returns once the greeting has arrived.
func (n *nodeWS) open(name, url string, deflate bool) nodeEvent {
	n.t.Helper()
	return n.do(map[string]any{"op": "open", "name": name, "url": url, "deflate": deflate}, "open", 10*time.Second)
}

func (n *nodeWS) pause(name string) {
	n.t.Helper()
	n.do(map[string]any{"op": "pause", "name": name}, "paused", 5*time.Second)
}

func (n *nodeWS) resume(name string) {
	n.t.Helper()
	n.do(map[string]any{"op": "resume", "name": name}, "resumed", 5*time.Second)
}

// wait returns once name has read rows data frames or was closed, with
// the frames themselves when dump is set.
func (n *nodeWS) wait(name string, rows int, dump bool) nodeEvent {
	n.t.Helper()
	return n.do(map[string]any{"op": "wait", "name": name, "rows": rows, "dump": dump}, "rows", 30*time.Second)
}

// rows is wait that fails the test unless name read rows frames, open.
func (n *nodeWS) rows(name string, rows int) []string {
	n.t.Helper()
	ev := n.wait(name, rows, true)
	if len(ev.Rows) != rows || ev.Close != nil {
		n.t.Fatalf("%s: %d rows of %d, closed %+v %s", name, ev.Count, rows, ev.Close, ev.Error)
	}
	return ev.Rows
}

// nodeTrades publishes benchTrade rows to a stream in batches of 10 and
// waits for each batch's ack, so no delivery holds more than one batch: a
// subscriber under a small max_backlog is dropped for lagging, not for a
// burst.
type nodeTrades struct {
	p    *pubConn
	r    *rand.Rand
	next int // rows published so far
}

func newNodeTrades(t testing.TB, srv *Server, stream string) *nodeTrades {
	t.Helper()
	return &nodeTrades{p: dialPublisher(t, srv, stream), r: rand.New(rand.NewSource(1))}
}

// publish publishes n rows, each stamped (event_ts) a microsecond after
// the one before.
func (pt *nodeTrades) publish(n int) {
	pt.p.t.Helper()
	for n > 0 {
		k := min(n, 10)
		var b strings.Builder
		b.WriteByte('[')
		for j := range k {
			if j > 0 {
				b.WriteByte(',')
			}
			b.Write(benchTrade(pt.r, pt.next, 1733480000000000000+int64(pt.next)*1000))
			pt.next++
		}
		b.WriteByte(']')
		if r := pt.p.roundTrip(b.String()); r.Error != "" || len(r.OK) != k {
			pt.p.t.Fatalf("publish: %+v", r)
		}
		n -= k
	}
}

// connFrom returns how many frames the server holds for the connection
// from 127.0.0.1:port, queued or in write, and the code it closed it with
// (0 while open).
func connFrom(srv *Server, port int) (queued, closeCode int) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for c := range srv.conns {
		if a, ok := c.nc.RemoteAddr().(*net.TCPAddr); ok && a.Port == port {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.out.Len(), c.closeCode
		}
	}
	return 0, 0
}

// stall has node stop reading name's socket. It first shrinks the
// server's send buffer of that connection to the kernel's least (on
// 127.0.0.1 it grows to megabytes), so that the server's queue for the
// subscriber starts growing after kilobytes, not megabytes, of rows.
func stall(t testing.TB, srv *Server, node *nodeWS, name string, port int) {
	t.Helper()
	var rc syscall.RawConn
	srv.mu.Lock()
	for c := range srv.conns {
		if a, ok := c.nc.RemoteAddr().(*net.TCPAddr); ok && a.Port == port {
			rc = rawConnOf(c.raw)
		}
	}
	srv.mu.Unlock()
	if rc == nil {
		t.Fatalf("no socket of the server's is connected to %s's port %d", name, port)
	}
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 1)
	}); cerr != nil || err != nil {
		t.Fatalf("shrink the send buffer: %v %v", cerr, err)
	}
	node.pause(name)
}

// TestNodeWSCompressingSubscribersDecodeWhatAPlainOneGets has node's ws
// subscribe with permessage-deflate beside a plain node subscriber: one
// there from the start, one that joins while rows flow, a replay from
// offset 1, a filtered one, and one that stops reading until the server
// holds a queue of frames for it, then reads on. Each decodes exactly the
// rows the plain subscriber with the same request receives.
func TestNodeWSCompressingSubscribersDecodeWhatAPlainOneGets(t *testing.T) {
	node := startNodeWS(t)
	srv := startServer(t, testConfig(t))
	pub := newNodeTrades(t, srv, "trades")
	pub.publish(100) // offsets 1..100, before anyone subscribes

	where := "?where=" + urlEscape(`{"symbol":"ETH-USD"}`)
	url := func(q string) string { return wsURL(srv, "/trades"+q) }
	open := func(name, q string, deflate bool) nodeEvent {
		ev := node.open(name, url(q), deflate)
		if want := map[bool]string{true: "permessage-deflate; client_no_context_takeover"}[deflate]; ev.Ext != want {
			t.Fatalf("%s negotiated %q, want %q", name, ev.Ext, want)
		}
		return ev
	}
	open("plain", "", false)
	open("plainWhere", where, false)
	open("early", "", true)
	open("where", where, true)
	lagger := open("lagger", "", true)
	pub.publish(300)
	open("late", "", true)
	open("replay", "?offset=1", true)

	// The lagger stops reading: once the kernel's buffers are full, the
	// server queues its frames, compressed for its group, until it reads on.
	stall(t, srv, node, "lagger", lagger.Port)
	for q, _ := connFrom(srv, lagger.Port); q < 100; q, _ = connFrom(srv, lagger.Port) {
		pub.publish(10)
		if pub.next > 20000 {
			t.Fatalf("the server queued %d frames for a subscriber that stopped reading, after %d rows", q, pub.next)
		}
	}
	t.Logf("the lagger's queue reached 100 frames after %d rows", pub.next-400)
	node.resume("lagger")
	pub.publish(200)
	total := pub.next

	plain := node.wait("plain", total-100, true)
	all := plain.Rows
	if early := node.wait("early", len(all), false); early.Bytes*2 > plain.Bytes {
		t.Errorf("the compressing subscriber read %d bytes, the plain one %d", early.Bytes, plain.Bytes)
	}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"early", all},
		{"lagger", all},
		{"late", all[300:]},
	} {
		if d := firstDiff(tc.want, node.rows(tc.name, len(tc.want))); d != "" {
			t.Fatalf("%s: %s", tc.name, d)
		}
	}
	open("plainReplay", "?offset=1", false)
	if d := firstDiff(node.rows("plainReplay", total), node.rows("replay", total)); d != "" {
		t.Fatalf("replay: %s", d)
	}
	var eth int // the ETH-USD rows of all
	for _, f := range all {
		if strings.Contains(f, `"symbol":"ETH-USD"`) {
			eth++
		}
	}
	if d := firstDiff(node.rows("plainWhere", eth), node.rows("where", eth)); d != "" {
		t.Fatalf("where=: %s", d)
	}
}

// TestNodeWSCompressingSubscriberDroppedFor4429ResumesExactly: under a
// small max_backlog, a node ws subscriber that stops reading is dropped
// with 4429 while another compressing one and a plain one read on. Once
// it reads again it decodes a prefix of the plain subscriber's rows, the
// close names the offset after it, and a compressing resume from there
// decodes the rest, with no gap or duplicate.
func TestNodeWSCompressingSubscriberDroppedFor4429ResumesExactly(t *testing.T) {
	const maxBacklog = 512 // room for a reading subscriber's hiccup, even under -race
	node := startNodeWS(t)
	cfg := testConfig(t)
	cfg.Limits.MaxBacklog = maxBacklog
	srv := startServer(t, cfg)
	pub := newNodeTrades(t, srv, "trades")
	pub.publish(50)
	url := wsURL(srv, "/trades")
	node.open("plain", url, false)
	node.open("fast", url, true)
	slow := node.open("slow", url, true)
	stall(t, srv, node, "slow", slow.Port)
	pub.publish(100)
	for q, code := connFrom(srv, slow.Port); code != wire.CloseTooSlow; q, code = connFrom(srv, slow.Port) {
		pub.publish(10)
		if pub.next > 50000 {
			t.Fatalf("a subscriber that stopped reading was not dropped after %d rows (its queue: %d frames, closed %d)", pub.next, q, code)
		}
	}
	t.Logf("dropped after %d rows", pub.next-150)
	node.resume("slow")
	pub.publish(100)
	total := pub.next - 50
	plain := node.wait("plain", total, true)
	want := plain.Rows
	if d := firstDiff(want, node.rows("fast", total)); d != "" {
		t.Fatalf("the compressing subscriber that kept reading: %s", d)
	}
	ev := node.wait("slow", total, true)
	if ev.Close == nil || ev.Close.Code != wire.CloseTooSlow {
		t.Fatalf("the stalled subscriber read %d rows and closed %+v, want 4429", ev.Count, ev.Close)
	}
	got := ev.Rows
	if len(got) == 0 || len(got) >= total {
		t.Fatalf("the stalled subscriber read %d rows of %d before its 4429", len(got), total)
	}
	if d := firstDiff(want[:len(got)], got); d != "" {
		t.Fatalf("the stalled subscriber's prefix: %s", d)
	}
	var ts wire.TooSlow
	if err := json.Unmarshal([]byte(ev.Close.Reason), &ts); err != nil {
		t.Fatalf("4429 reason %q: %v", ev.Close.Reason, err)
	}
	if next := frameOffset(t, got[len(got)-1]) + 1; ts.Offset != next {
		t.Fatalf("4429 names offset %d to resume at; the last row read was %d", ts.Offset, next-1)
	}
	resumed := node.open("resumed", url+"?offset="+strconv.FormatInt(ts.Offset, 10), true)
	if resumed.Ext == "" {
		t.Fatal("the resume did not negotiate compression")
	}
	rest := node.wait("resumed", total-len(got), true)
	if d := firstDiff(want[len(got):], rest.Rows); d != "" || rest.Close != nil {
		t.Fatalf("resumed at %d: %s (closed %+v)", ts.Offset, d, rest.Close)
	}
	if rest.Bytes*2*int64(total) > plain.Bytes*int64(len(rest.Rows)) {
		t.Errorf("the resumed replay read %d bytes for %d rows, the plain subscriber %d for %d: not compressed", rest.Bytes, len(rest.Rows), plain.Bytes, total)
	}
}

// frameOffset is the offset of data frame f.
func frameOffset(t testing.TB, f string) int64 {
	t.Helper()
	var parts []json.RawMessage
	if err := json.Unmarshal([]byte(f), &parts); err != nil || len(parts) != 3 {
		t.Fatalf("data frame %s is not [offset,ts,row]", f)
	}
	off, err := strconv.ParseInt(string(parts[0]), 10, 64)
	if err != nil {
		t.Fatalf("offset of %s: %v", f, err)
	}
	return off
}

// BenchmarkNodeWSBytesPerRow measures the bytes on the wire per delivered
// trades row with node's ws as the client, plain and with
// permessage-deflate: live, to subscribers there before the rows (caught
// up, so the compressing one shares its group's compressor), and replayed
// from the log from the first of them. Each iteration publishes 20,000
// rows in acknowledged 10-row frames. The bytes are what node's socket
// read after the greeting, frame headers included.
func BenchmarkNodeWSBytesPerRow(b *testing.B) {
	const n = 20000
	node := startNodeWS(b)
	srv := startServer(b, testConfig(b))
	pub := newNodeTrades(b, srv, "trades")
	url := wsURL(srv, "/trades")
	var live, replay [2]int64 // plain, compressed
	read := func(name string) int64 {
		ev := node.wait(name, n, false)
		if ev.Count != n || ev.Close != nil {
			b.Fatalf("%s: %d rows of %d, closed %+v %s", name, ev.Count, n, ev.Close, ev.Error)
		}
		node.do(map[string]any{"op": "close", "name": name}, "closed", 5*time.Second)
		return ev.Bytes
	}
	for i := range b.N {
		first := pub.next + 1
		plain, z := fmt.Sprint("live", i), fmt.Sprint("zlive", i)
		node.open(plain, url, false)
		node.open(z, url, true)
		pub.publish(n)
		live[0] += read(plain)
		live[1] += read(z)
		plain, z = fmt.Sprint("replay", i), fmt.Sprint("zreplay", i)
		from := url + "?offset=" + strconv.Itoa(first)
		node.open(plain, from, false)
		replay[0] += read(plain)
		node.open(z, from, true)
		replay[1] += read(z)
	}
	rows := float64(b.N * n)
	b.ReportMetric(float64(live[0])/rows, "plain-live-B/row")
	b.ReportMetric(float64(live[1])/rows, "deflate-live-B/row")
	b.ReportMetric(float64(live[1])/float64(live[0]), "live-ratio")
	b.ReportMetric(float64(replay[0])/rows, "plain-replay-B/row")
	b.ReportMetric(float64(replay[1])/rows, "deflate-replay-B/row")
	b.ReportMetric(float64(replay[1])/float64(replay[0]), "replay-ratio")
}

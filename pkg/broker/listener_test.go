package broker

import (
	"bufio"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	charmlog "github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

func serve(t *testing.T, lim connLimits) *connListener {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	l, err := listenConns("127.0.0.1:0", nil, h, lim, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(time.Second) })
	return l
}

// get sends one keep-alive request on a new connection and returns the
// connection, left open, and the answer's status and body.
func get(t *testing.T, l *connListener) (net.Conn, int, string) {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return c, resp.StatusCode, string(b)
}

// waitOpen waits until the listener counts n open connections.
func waitOpen(t *testing.T, l *connListener, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l.Counts().Open != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open, want %d", l.Counts().Open, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestConnectionsOverABoundAreRefusedWithAReason(t *testing.T) {
	for _, c := range []struct {
		name string
		lim  connLimits
		key  string
	}{
		{"per address", connLimits{IdleTimeout: time.Minute, MaxConns: 100, MaxConnsPerAddr: 2}, "limits.max_connections_per_address"},
		{"in total", connLimits{IdleTimeout: time.Minute, MaxConns: 2}, "limits.max_connections"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := serve(t, c.lim)
			first, s1, _ := get(t, l)
			_, s2, _ := get(t, l)
			if s1 != 200 || s2 != 200 {
				t.Fatalf("the first two: %d, %d; want 200", s1, s2)
			}
			_, s3, body := get(t, l)
			if s3 != http.StatusServiceUnavailable || !strings.Contains(body, c.key+")") {
				t.Fatalf("the third: %d %q; want 503 naming %s", s3, body, c.key)
			}
			counts := l.Counts()
			if counts.Open != 2 || counts.RefusedTotal+counts.RefusedPerAddr != 1 {
				t.Fatalf("counts %+v; want 2 open, 1 refused", counts)
			}
			// A place given back is taken again.
			first.Close()
			waitOpen(t, l, 1)
			if _, s, _ := get(t, l); s != 200 {
				t.Fatalf("after a close: %d, want 200", s)
			}
		})
	}
}

func TestAnIdleKeepAliveConnectionIsClosed(t *testing.T) {
	l := serve(t, connLimits{IdleTimeout: 100 * time.Millisecond, MaxConns: 10})
	c, s, _ := get(t, l)
	if s != 200 {
		t.Fatalf("HTTP %d", s)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("an idle keep-alive connection: read %d bytes, %v; want EOF once the server closed it", n, err)
	}
	waitOpen(t, l, 0)
}

// TestResolveKeepsAReserveOfDescriptors: the bound on connections leaves
// an eighth of the descriptor limit (at least 256), and LogDescriptors
// more for each durable log served.
func TestResolveKeepsAReserveOfDescriptors(t *testing.T) {
	for _, c := range []struct {
		nofile    uint64
		logs      int
		max, want int
		clamped   bool
	}{
		{4096, 0, 0, 4096 - 512, false},
		{1024, 0, 0, 1024 - 256, false},
		{1 << 20, 0, 0, 1<<20 - 1<<17, false},
		{4096, 0, 100, 100, false},
		{4096, 0, 5000, 3584, true},
		{200, 0, 0, 16, false},
		{0, 0, 0, 10000, false},
		{0, 0, 50, 50, false},
		{1024, 64, 0, 1024 - 256 - 64*6, false},
		{1024, 150, 0, 16, false}, // the logs need more than the limit
		{4096, 64, 3584, 4096 - 512 - 64*6, true},
		{0, 150, 0, 10000, false},
	} {
		got, clamped := connLimits{MaxConns: c.max}.Resolve(c.nofile, c.logs)
		if got.MaxConns != c.want || clamped != c.clamped {
			t.Errorf("nofile %d, %d logs, max_connections %d: %d (clamped %v); want %d (%v)", c.nofile, c.logs, c.max, got.MaxConns, clamped, c.want, c.clamped)
		}
	}
	// The limit a warning suggests is the least that serves what it says.
	for _, c := range []struct{ conns, logs int }{{256, 0}, {256, 150}, {1000, 10}, {5000, 10000}} {
		n := nofileFor(c.conns, c.logs)
		if connsLeft(n, c.logs) < c.conns || connsLeft(n-1, c.logs) >= c.conns {
			t.Errorf("nofileFor(%d conns, %d logs) = %d, which leaves %d (and %d one lower)", c.conns, c.logs, n, connsLeft(n, c.logs), connsLeft(n-1, c.logs))
		}
	}
}

// TestTheConnectionBoundMakesRoomForTheLogsAReloadAdds: each durable
// stream a reload starts takes LogDescriptors more from the connections'
// share of the descriptor limit, and gives them back when it stops; a
// non-durable stream takes none.
func TestTheConnectionBoundMakesRoomForTheLogsAReloadAdds(t *testing.T) {
	nofile := descriptorLimit()
	if nofile == 0 {
		t.Skip("no descriptor limit to read on this platform")
	}
	cfg := testConfig(t) // trades is durable, live and raw are not
	srv := startServer(t, cfg)
	bound := func() int { return int(srv.entry.Load().ln.max.Load()) }
	if got, want := bound(), connsLeft(nofile, 1); got != want {
		t.Fatalf("one durable stream under a limit of %d: a bound of %d connections, want %d", nofile, got, want)
	}
	next := cfg
	next.Streams = append([]config.Stream(nil), cfg.Streams...)
	for _, name := range []string{"a", "b", "c"} {
		st := config.DefaultStream(name)
		st.Schema = config.RawJSON(config.DemoSchema)
		next.Streams = append(next.Streams, st)
	}
	if err := srv.Reload(next); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got, want := bound(), connsLeft(nofile, 4); got != want || got >= connsLeft(nofile, 1) {
		t.Errorf("four durable streams: a bound of %d connections, want %d", got, want)
	}
	if err := srv.Reload(cfg); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got, want := bound(), connsLeft(nofile, 1); got != want {
		t.Errorf("back to one durable stream: a bound of %d connections, want %d", got, want)
	}
}

// TestALimitTooSmallForTheLogsIsWarnedAbout: serve says so, naming
// ulimit -n and LimitNOFILE= and a limit that would do, when the logs'
// reserve leaves fewer connections than it should hold.
func TestALimitTooSmallForTheLogsIsWarnedAbout(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		logs   int
		max    int
		warn   string // "" for none
	}{
		{1024, 10, 0, ""},
		{1024, 150, 0, "the descriptor limit is 1024, and serve keeps 1156 descriptors from connections for its 150 durable logs (6 a log) and the rest of the process, so it holds at most 16 connections; raise the limit (ulimit -n, or LimitNOFILE= in a systemd unit) to at least 1412"},
		{4096, 10, 5000, "limits.max_connections is 5000, but the descriptor limit is 4096, and serve keeps 572 descriptors from connections for its 10 durable logs (6 a log) and the rest of the process: serving at most 3524 connections; raise the limit (ulimit -n, or LimitNOFILE= in a systemd unit) to 5782 to serve 5000"},
		{4096, 10, 1000, ""},
	} {
		cfg := testConfig(t)
		cfg.Limits.MaxConnections = c.max
		logs := &testkit.SyncBuffer{}
		srv, err := New(cfg, Options{Logger: charmlog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		srv.connLimits(c.nofile, c.logs, true)
		got := strings.TrimSpace(logs.String())
		if (c.warn == "") != (got == "") || !strings.Contains(got, c.warn) {
			t.Errorf("nofile %d, %d logs, max_connections %d: logged %q; want %q", c.nofile, c.logs, c.max, got, c.warn)
		}
	}
}

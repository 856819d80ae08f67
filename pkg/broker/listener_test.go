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

func TestResolveKeepsAReserveOfDescriptors(t *testing.T) {
	for _, c := range []struct {
		nofile    uint64
		max, want int
		clamped   bool
	}{
		{4096, 0, 4096 - 512, false},
		{1024, 0, 1024 - 256, false},
		{1 << 20, 0, 1<<20 - 1<<17, false},
		{4096, 100, 100, false},
		{4096, 5000, 3584, true},
		{200, 0, 16, false},
		{0, 0, 10000, false},
		{0, 50, 50, false},
	} {
		got, clamped := connLimits{MaxConns: c.max}.Resolve(c.nofile)
		if got.MaxConns != c.want || clamped != c.clamped {
			t.Errorf("nofile %d, max_connections %d: %d (clamped %v); want %d (%v)", c.nofile, c.max, got.MaxConns, clamped, c.want, c.clamped)
		}
	}
}

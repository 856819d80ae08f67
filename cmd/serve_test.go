package cmd

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPprofServesTheProfilerOnLoopbackOnly: --pprof serves net/http/pprof
// on a loopback listener of its own, refuses any other address (the
// profiler has no auth), and its stop closes the listener.
func TestPprofServesTheProfilerOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{":6060", "0.0.0.0:6060", "[::]:6060", "192.0.2.1:6060", "example.com:6060", "6060"} {
		if _, _, err := servePprof(addr); err == nil {
			t.Errorf("--pprof %s was accepted; want a refusal (loopback only)", addr)
		}
	}
	addr, stop, err := servePprof("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
	})
	c := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + addr.String() + "/debug/pprof/goroutine?debug=1"
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile:") {
		t.Fatalf("GET %s: %d %.200s (%v); want the goroutine profile", url, resp.StatusCode, body, err)
	}
	stop()
	stopped = true
	if resp, err := c.Get(url); err == nil {
		resp.Body.Close()
		t.Fatalf("GET %s after stop answered %d; want the listener closed", url, resp.StatusCode)
	}
}

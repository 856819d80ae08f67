//go:build linux

package broker

import (
	"syscall"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// TestMetricsCountChildRestartsByRoleAcrossReloadsAndReplaysByTier: a
// killed seal child counts one restart of role seal; a reload that removes
// a stream replaces every child (one that adds a stream hands its log to
// the children running instead), and the count stays (a counter never goes
// down); the next kill makes it two. Rows the seal child moved into a
// file and clean evicted are replayed from the local tier.
func TestMetricsCountChildRestartsByRoleAcrossReloadsAndReplaysByTier(t *testing.T) {
	if !testkit.SoakFull() {
		// 5 s of killing and restarting children: CI runs it on every run
		// (it sets the variable); the README's go test ./... stays under 3 min.
		t.Skip("runs under " + testkit.SoakEnv + "=full")
	}
	exe := streamcastExe(t)
	cfg := testConfig(t)
	// trades (durable), live, and orders for the reload to remove.
	cfg.Streams = append(cfg.Streams[:2:2], config.DefaultStream("orders"))
	cfg.Maintain = maintainOf(map[logstore.Role]time.Duration{logstore.RoleSeal: 100 * time.Millisecond, logstore.RoleClean: 200 * time.Millisecond}, time.Second)
	srv := startServer(t, cfg, Options{Executable: exe})

	restarts := func(role string) float64 {
		v, _ := lookupMetric(scrape(t, srv), "streamcast_maintain_restarts_total", "role", role)
		return v
	}
	killSeal := func() {
		t.Helper()
		c := srv.Stats().Children[0]
		if c.Role != "seal" || c.PID == nil {
			t.Fatalf("first child %+v, want a running seal", c)
		}
		if err := syscall.Kill(*c.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the seal child to be restarted and ready", 15*time.Second, func() bool {
			c2 := srv.Stats().Children[0]
			return c2.PID != nil && *c2.PID != *c.PID && c2.Ready
		})
	}
	if got := restarts("seal"); got != 0 {
		t.Fatalf("seal restarts %v before any kill", got)
	}
	killSeal()
	if got, clean := restarts("seal"), restarts("clean"); got != 1 || clean != 0 {
		t.Fatalf("after one kill: seal restarts %v, clean %v; want 1 and 0", got, clean)
	}

	next := cfg
	next.Streams = cfg.Streams[:2]
	if err := srv.Reload(next); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if c := srv.Stats().Children[0]; c.Restarts != 0 {
		t.Fatalf("the reload did not replace the children (seal shows %d restarts); this test needs it to", c.Restarts)
	}
	if got := restarts("seal"); got != 1 {
		t.Fatalf("after the reload replaced the children: seal restarts %v, want still 1", got)
	}
	killSeal()
	if got := restarts("seal"); got != 2 {
		t.Fatalf("after a second kill: seal restarts %v, want 2", got)
	}

	// Sealed and evicted rows replay from the local tier.
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(batch(0, 10)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	waitFor(t, "the rows to be sealed and evicted", 20*time.Second, func() bool {
		s := streamStats(srv, "trades")
		return s.BufferedRows != nil && *s.BufferedRows == 0 && s.LocalFiles != nil && *s.LocalFiles >= 1
	})
	ws, _ := mustDial(t, wsURL(srv, "/trades?offset=1"))
	for n := range 10 {
		if _, err := readFrame(t, ws); err != nil {
			t.Fatalf("replay: frame %d of 10: %v", n+1, err)
		}
	}
	waitFor(t, "the replay's rows by tier in /metrics", 10*time.Second, func() bool {
		fams := scrape(t, srv)
		local, _ := lookupMetric(fams, "streamcast_rows_replayed_total", "stream", "trades", "tier", "local")
		buf, _ := lookupMetric(fams, "streamcast_rows_replayed_total", "stream", "trades", "tier", "buffer")
		return local == 10 && buf == 0
	})
}

//go:build linux

package broker

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestMetricsReportTheReplicationLagStatsReports: a replicated stream's
// replicated_through and replication lag are in /metrics with the values
// /stats has, caught up (lag 0) and while the replicator is held (SIGSTOP)
// and rows wait (lag 5, and seconds that grow from the last round).
func TestMetricsReportTheReplicationLagStatsReports(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1] // trades
	cfg.Streams[0].Replicate = true
	cfg.Published = filepath.Join(t.TempDir(), "pub")
	cfg.Maintain = maintainOf(nil, time.Second) // the replicate child alone
	cfg.Replicate.SyncInterval = 20 * time.Millisecond
	srv := startServer(t, cfg, Options{Executable: streamcastExe(t)})

	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(batch(0, 10)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	waitFor(t, "the replica to hold offset 10", 30*time.Second, func() bool {
		s := streamStats(srv, "trades")
		return s.ReplicatedThrough != nil && *s.ReplicatedThrough == 10
	})
	gauges := func() (through, lagRows, lagSecs float64) {
		t.Helper()
		fams := scrape(t, srv)
		var ok [3]bool
		through, ok[0] = lookupMetric(fams, "streamcast_replicated_through", "stream", "trades")
		lagRows, ok[1] = lookupMetric(fams, "streamcast_replication_lag_rows", "stream", "trades")
		lagSecs, ok[2] = lookupMetric(fams, "streamcast_replication_lag_seconds", "stream", "trades")
		if ok != [3]bool{true, true, true} {
			t.Fatalf("/metrics lacks a replication gauge of trades (found %v)", ok)
		}
		return through, lagRows, lagSecs
	}
	if th, rows, secs := gauges(); th != 10 || rows != 0 || secs != 0 {
		t.Fatalf("caught up: /metrics says through %v, lag %v rows %v s; want 10, 0, 0", th, rows, secs)
	}

	kid := srv.Stats().Children[0]
	if kid.Role != "replicate" || kid.PID == nil {
		t.Fatalf("child %+v, want the replicate child", kid)
	}
	if err := syscall.Kill(*kid.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(*kid.PID, syscall.SIGCONT) }()
	if r := p.roundTrip(batch(10, 5)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	th, rows, secs := gauges()
	s := streamStats(srv, "trades")
	if th != 10 || rows != 5 || secs <= 0 {
		t.Fatalf("held: /metrics says through %v, lag %v rows %v s; want 10, 5, > 0", th, rows, secs)
	}
	if *s.ReplicatedThrough != 10 || *s.ReplicationLagRows != 5 || *s.ReplicationLagS < secs {
		t.Fatalf("/stats says through %d, lag %d rows %v s after /metrics said 10, 5, %v s", *s.ReplicatedThrough, *s.ReplicationLagRows, *s.ReplicationLagS, secs)
	}
}

//go:build linux

package broker

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/broker/config"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
)

// replicatedConfig is testConfig with trades replicated by a child of
// serve, at the default sync interval, and no maintenance role.
func replicatedConfig(b *testing.B) config.Config {
	cfg := testConfig(b)
	cfg.Streams = cfg.Streams[:1]
	cfg.Streams[0].Replicate = true
	cfg.Published = filepath.Join(b.TempDir(), "pub")
	cfg.Maintain = maintainOf(nil, time.Minute)
	return cfg
}

func BenchmarkPublishOneRowFramesReplicated(b *testing.B) {
	benchOneRowFrames(b, startServer(b, replicatedConfig(b), Options{Executable: streamcastExe(b)}))
}

func BenchmarkPublish8x100RowFramesReplicated(b *testing.B) {
	bench8x100(b, startServer(b, replicatedConfig(b), Options{Executable: streamcastExe(b)}))
}

// BenchmarkReplicationLag publishes single-row frames (64 in flight) for
// STREAMCAST_REPLICATION_SECONDS (default 10) to a replicated stream, and
// reports how far the replica trails: for every 100th acknowledged row, the
// time from its acknowledgement until the replicator reports it shipped
// (lag_ms), and at each 5 ms poll, the rows acknowledged and not yet
// shipped (lag_rows). Run it with -benchtime 1x.
//
//	go test ./pkg/broker -run '^$' -bench ReplicationLag -benchtime 1x
func BenchmarkReplicationLag(b *testing.B) {
	secs := 10 * time.Second
	if v := os.Getenv("STREAMCAST_REPLICATION_SECONDS"); v != "" {
		d, err := time.ParseDuration(v + "s")
		if err != nil {
			b.Fatalf("STREAMCAST_REPLICATION_SECONDS: %v", err)
		}
		secs = d
	}
	srv := startServer(b, replicatedConfig(b), Options{Executable: streamcastExe(b)})
	dir := srv.reg.Get("trades").log.Dir()
	p := dialPublisher(b, srv, "trades")

	var (
		mu      sync.Mutex
		acked   int64 // the highest offset acknowledged
		ackedAt = map[int64]time.Time{}
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var lagRows []float64
	shippedAt := map[int64]time.Time{} // sampled offset → when first seen shipped
	wg.Add(1)
	go func() { // the poller: what the replicator reports, every 5 ms
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			pr, ok, err := replica.ReadProgress(dir)
			if err != nil || !ok {
				continue
			}
			now := time.Now()
			mu.Lock()
			lagRows = append(lagRows, float64(max(acked-(pr.ShippedEnd-1), 0)))
			for off := range ackedAt {
				if off < pr.ShippedEnd {
					if _, seen := shippedAt[off]; !seen {
						shippedAt[off] = now
					}
				}
			}
			mu.Unlock()
		}
	}()

	sem := make(chan struct{}, 64)
	replies := make(chan error, 1)
	deadline := time.Now().Add(secs)
	go func() {
		for {
			r, err := p.reply()
			if err != nil || r.Error != "" {
				replies <- err
				return
			}
			off := r.OK[0]
			mu.Lock()
			acked = off
			if off%100 == 0 {
				ackedAt[off] = time.Now()
			}
			mu.Unlock()
			<-sem
			if time.Now().After(deadline) && len(sem) == 0 {
				replies <- nil
				return
			}
		}
	}()
	msg := []byte(trade(1))
	b.ResetTimer()
	for time.Now().Before(deadline) {
		sem <- struct{}{}
		if err := p.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-replies; err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	last := acked
	mu.Unlock()
	waitFor(b, "the last row to be shipped", time.Minute, func() bool {
		pr, ok, _ := replica.ReadProgress(dir)
		return ok && pr.ShippedEnd > last
	})
	close(stop)
	wg.Wait()

	var lagMS []float64
	for off, at := range ackedAt {
		if s, ok := shippedAt[off]; ok {
			lagMS = append(lagMS, float64(s.Sub(at).Microseconds())/1000)
		}
	}
	b.ReportMetric(float64(last)/secs.Seconds(), "rows/s")
	b.ReportMetric(quantile(lagMS, 0.5), "p50_lag_ms")
	b.ReportMetric(quantile(lagMS, 0.99), "p99_lag_ms")
	b.ReportMetric(quantile(lagRows, 0.5), "p50_lag_rows")
	b.ReportMetric(quantile(lagRows, 0.99), "p99_lag_rows")
}

// quantile is the q-quantile of xs (nearest rank); 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

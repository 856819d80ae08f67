//go:build linux

package broker

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta/config"
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

// BenchmarkReplicationLag publishes single-row frames (64 in flight) to a
// replicated stream at a paced rate, and reports how far the replica
// trails: for every 100th acknowledged row, the time from its
// acknowledgement until the replicator reports it shipped (lag_ms), and at
// each 5 ms poll, the rows acknowledged and not yet shipped (lag_rows); also
// the rate achieved and how long the replicator's rounds took (round_ms).
// The target is p99 lag ≤ 1 s at 50k rows/s over 60 s.
//
//	STREAMCAST_REPLICATION_RATE     rows/s to offer (default 50000; 0 = flat out)
//	STREAMCAST_REPLICATION_SECONDS  how long to publish (default 10; 60 under STREAMCAST_SOAK=full)
//
// It runs with the replica in a directory (dir) and on versitygw (s3).
//
//	go test ./pkg/broker -run '^$' -bench ReplicationLag -benchtime 1x
func BenchmarkReplicationLag(b *testing.B) {
	for _, kind := range []string{"dir", "s3"} {
		b.Run(kind, func(b *testing.B) { benchReplicationLag(b, kind) })
	}
}

func benchReplicationLag(b *testing.B, kind string) {
	secs := 10 * time.Second
	if testkit.SoakFull() {
		secs = time.Minute
	}
	if v := os.Getenv("STREAMCAST_REPLICATION_SECONDS"); v != "" {
		d, err := time.ParseDuration(v + "s")
		if err != nil {
			b.Fatalf("STREAMCAST_REPLICATION_SECONDS: %v", err)
		}
		secs = d
	}
	rate := 50000.0
	if v := os.Getenv("STREAMCAST_REPLICATION_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 {
			b.Fatalf("STREAMCAST_REPLICATION_RATE=%q: give rows/s, or 0 for flat out", v)
		}
		rate = r
	}
	cfg := replicatedConfig(b)
	if kind == "s3" {
		// litestream's S3 client cannot load a CA bundle; versitygw is
		// plain HTTP.
		b.Setenv("AWS_CA_BUNDLE", "")
		s3 := testkit.StartS3(b, helperForker.Start)
		s3.UseCredentials(b)
		cfg.Published = "s3://" + testBucket + "/tables"
		cfg.S3 = warehouse.S3{Endpoint: s3.Endpoint(), Region: testRegion, PathStyle: true}
	}
	srv := startServer(b, cfg, Options{Executable: streamcastExe(b)})
	dir := srv.reg.Get("trades").log.Dir()
	p := dialPublisher(b, srv, "trades")

	type sample struct {
		off int64
		at  time.Time
	}
	var (
		mu      sync.Mutex
		acked   int64    // the highest offset acknowledged
		samples []sample // every 100th acknowledged offset, in order
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var lagRows, lagMS, roundMS []float64
	wg.Add(1)
	go func() { // the poller: what the replicator reports, every 5 ms
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		next := 0 // samples[:next] are seen shipped
		var lastRound time.Time
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
			if !pr.At.Equal(lastRound) && !pr.Started.IsZero() {
				lastRound = pr.At
				roundMS = append(roundMS, float64(pr.At.Sub(pr.Started).Microseconds())/1000)
			}
			mu.Lock()
			lagRows = append(lagRows, float64(max(acked-(pr.ShippedEnd-1), 0)))
			for ; next < len(samples) && samples[next].off < pr.ShippedEnd; next++ {
				lagMS = append(lagMS, float64(now.Sub(samples[next].at).Microseconds())/1000)
			}
			mu.Unlock()
		}
	}()

	sem := make(chan struct{}, 64)
	replies := make(chan error, 1)
	start := time.Now()
	deadline := start.Add(secs)
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
				samples = append(samples, sample{off, time.Now()})
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
	for i := 0; ; i++ {
		now := time.Now()
		if now.After(deadline) {
			break
		}
		if rate > 0 {
			// Paced: frame i goes no sooner than start + i/rate. Sleeping
			// only when a millisecond or more ahead keeps the pace without
			// a timer per frame.
			if due := start.Add(time.Duration(float64(i) / rate * float64(time.Second))); due.Sub(now) >= time.Millisecond {
				time.Sleep(due.Sub(now))
			}
		}
		sem <- struct{}{}
		if err := p.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-replies; err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	mu.Lock()
	last := acked
	mu.Unlock()
	waitFor(b, "the last row to be shipped", time.Minute, func() bool {
		pr, ok, _ := replica.ReadProgress(dir)
		return ok && pr.ShippedEnd > last
	})
	close(stop)
	wg.Wait()

	b.ReportMetric(float64(last+1)/elapsed.Seconds(), "rows/s")
	b.ReportMetric(quantile(lagMS, 0.5), "p50_lag_ms")
	b.ReportMetric(quantile(lagMS, 0.99), "p99_lag_ms")
	b.ReportMetric(quantile(lagRows, 0.5), "p50_lag_rows")
	b.ReportMetric(quantile(lagRows, 0.99), "p99_lag_rows")
	b.ReportMetric(quantile(roundMS, 0.5), "p50_round_ms")
	b.ReportMetric(quantile(roundMS, 0.99), "p99_round_ms")
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

package logstore

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/log"
)

// benchDuration is how long the time-based benchmarks run
// (LOGSTORE_BENCH_DURATION, a Go duration; default def).
func benchDuration(b testing.TB, def time.Duration) time.Duration {
	if v := os.Getenv("LOGSTORE_BENCH_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("LOGSTORE_BENCH_DURATION=%q: %v", v, err)
		}
		return d
	}
	return def
}

// publishedLog returns a log of sealedRows trade rows that only the
// published table holds (no local file, nothing buffered).
func publishedLog(b *testing.B, be backend) *Log {
	ctx := context.Background()
	cfg := tierConfig()
	cfg.TargetSealBytes = 0 // the default 8 MiB files
	cfg.TargetFileBytes = 1 // no compaction
	l := be.make(b, cfg)
	rows := tradeRows(b, sealedRows)
	for i := 0; i < len(rows); i += 1000 {
		if _, err := l.Append(ctx, rows[i:i+1000], 1, nil); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := l.Seal(ctx, true); err != nil {
		b.Fatal(err)
	}
	if _, err := l.Publish(ctx, true); err != nil {
		b.Fatal(err)
	}
	l.setOverride(Config{StagingMaxBytes: 1})
	for range 2 {
		if _, err := l.Clean(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if st, _ := l.Status(ctx); st.LocalFiles != 0 || st.BufferedRows != 0 || st.PublishedThrough != sealedRows {
		b.Fatalf("the published table is not the only tier: %+v", st)
	}
	return l
}

// BenchmarkReplayPublished measures a replay (Scan to canonical bytes, as
// a subscriber's catch-up reads it) of rows only the published table
// holds, local directory and S3 (versitygw on 127.0.0.1).
func BenchmarkReplayPublished(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			l := publishedLog(b, be)
			b.ResetTimer()
			cpu0 := cpuTime()
			benchScan(b, l)
			// The machine may be shared: rows per second of this process's
			// CPU time is the figure load does not distort.
			b.ReportMetric(float64(b.N)*sealedRows/(cpuTime()-cpu0).Seconds(), "rows/cpu-s")
		})
	}
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFreshness appends a steady 1,000 rows/s (groups of 10) while the
// seal role runs every 250ms and publish every 1s, both flushing every 1s,
// and measures how long each group takes to become visible in the
// published table (published_through covers it; the commit that made it
// visible happened just before). It reports the p50, p99 and max in
// seconds. Run it with -benchtime=1x; LOGSTORE_BENCH_DURATION sets how
// long it appends (default 20s).
func BenchmarkFreshness(b *testing.B) {
	for _, be := range []string{"local", "s3"} {
		b.Run(be, func(b *testing.B) {
			for range b.N {
				p50, p99, worst, n := freshness(b, be, benchDuration(b, 20*time.Second))
				b.ReportMetric(p50, "p50-s")
				b.ReportMetric(p99, "p99-s")
				b.ReportMetric(worst, "max-s")
				b.ReportMetric(float64(n), "groups")
			}
		})
	}
}

func freshness(b *testing.B, be string, d time.Duration) (p50, p99, worst float64, n int) {
	ctx := context.Background()
	cfg := tierConfig()
	cfg.TargetSealBytes = 0
	cfg.TargetFileBytes = 0
	cfg.StagingRetention = time.Hour
	cfg.PublishedSnapshotRetention = time.Minute
	cfg.DeleteGrace = time.Minute
	if be == "s3" {
		s := startS3(b)
		s.UseCredentials(b)
		c := s3LogConfig(s, "fresh")
		cfg.Published, cfg.S3 = c.Published, c.S3
	}
	l := createLog(b, mustCompile(b, tradeSchema), cfg)
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, r := range []struct {
		role  string
		every time.Duration
	}{{"seal", 250 * time.Millisecond}, {"publish", time.Second}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			logger := log.New(os.Stderr)
			logger.SetLevel(log.ErrorLevel)
			_ = runRole(rctx, r.role, []string{l.Dir()}, MaintainOptions{Every: r.every, FlushEvery: time.Second, Logger: logger})
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	rows := tradeRows(b, 10)
	type group struct {
		last int64
		at   time.Time
	}
	var mu sync.Mutex
	var pending []group
	var lat []float64
	done := make(chan struct{})
	go func() { // the watcher
		defer close(done)
		for {
			through, err := l.PublishedThrough(ctx)
			now := time.Now()
			if err != nil {
				return
			}
			mu.Lock()
			for len(pending) > 0 && pending[0].last <= through {
				lat = append(lat, now.Sub(pending[0].at).Seconds())
				pending = pending[1:]
			}
			left := len(pending)
			mu.Unlock()
			select {
			case <-rctx.Done():
				if left == 0 {
					return
				}
			default:
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		<-tick.C
		first, err := l.Append(ctx, rows, time.Now().UnixMicro(), nil)
		if err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		pending = append(pending, group{first + int64(len(rows)) - 1, time.Now()})
		mu.Unlock()
	}
	// Let the last groups land (at most a few seconds), then stop.
	wait := time.Now().Add(10 * time.Second)
	for time.Now().Before(wait) {
		mu.Lock()
		left := len(pending)
		mu.Unlock()
		if left == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(pending) > 0 {
		b.Fatalf("%d groups never became visible", len(pending))
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return q(0.5), q(0.99), lat[len(lat)-1], len(lat)
}

// BenchmarkMaintainersKeepUp appends 200,000 rows/s (a group every 10ms,
// larger after a late tick) in this process while the five roles run as child processes
// with serve's default cadences (seal 250ms, compact, publish and clean
// 10s, clean-published 60s, flush 60s) and default targets, and samples
// the log every second. It reports the append rate reached and the
// largest buffer, local file count and publish lag seen in the second half
// of the run against the first: bounded means the second half is no worse.
// Run it with -benchtime=1x; LOGSTORE_BENCH_DURATION sets the length
// (default 60s; the figure is 5m).
func BenchmarkMaintainersKeepUp(b *testing.B) {
	for range b.N {
		keepUp(b, benchDuration(b, 60*time.Second))
	}
}

func keepUp(b *testing.B, d time.Duration) {
	ctx := context.Background()
	cfg := Config{StagingRetention: time.Minute, PublishedSnapshotRetention: 5 * time.Minute, DeleteGrace: time.Minute}
	l := createLog(b, mustCompile(b, tradeSchema), cfg)
	cadence := map[string]string{"seal": "250ms", "compact": "10s", "publish": "10s", "clean": "10s", "clean-published": "60s"}
	for _, r := range logRoleNames() {
		b.Setenv("LOGSTORE_ROLE_EVERY", cadence[r])
		b.Setenv("LOGSTORE_ROLE_FLUSH", "60s")
		startHelper(b, "run-role", l.Dir(), r)
	}
	const rate, every, maxGroup = 200_000, 10 * time.Millisecond, 10_000
	rows := tradeRows(b, maxGroup)
	type sample struct {
		at time.Duration
		st Status
	}
	var samples []sample
	start := time.Now()
	nextSample := start.Add(time.Second)
	tick := time.NewTicker(every)
	defer tick.Stop()
	appended := 0
	for time.Since(start) < d {
		<-tick.C
		// Keep the average rate: a late tick appends what the missed ones
		// would have.
		n := min(int(rate*time.Since(start).Seconds())-appended, maxGroup)
		if n <= 0 {
			continue
		}
		if _, err := l.Append(ctx, rows[:n], time.Now().UnixMicro(), nil); err != nil {
			b.Fatal(err)
		}
		appended += n
		if time.Now().After(nextSample) {
			st, err := l.Status(ctx)
			if err != nil {
				b.Fatal(err)
			}
			samples = append(samples, sample{time.Since(start), st})
			nextSample = nextSample.Add(time.Second)
		}
	}
	elapsed := time.Since(start)
	half := func(second bool) (buf, files, lag int64, lagSecs float64) {
		for i, s := range samples {
			if (i >= len(samples)/2) != second {
				continue
			}
			buf = max(buf, s.st.BufferedRows)
			files = max(files, s.st.LocalFiles)
			lag = max(lag, s.st.PublishLagRows)
			lagSecs = max(lagSecs, s.st.PublishLagSecs)
		}
		return
	}
	b1, f1, l1, s1 := half(false)
	b2, f2, l2, s2 := half(true)
	last := samples[len(samples)-1].st
	b.ReportMetric(float64(appended)/elapsed.Seconds(), "rows/s")
	b.ReportMetric(float64(b2), "max-buffered-rows")
	b.ReportMetric(float64(f2), "max-local-files")
	b.ReportMetric(s2, "max-publish-lag-s")
	b.Logf("%s at %.0f rows/s; first half max: buffer %d rows, %d local files, publish lag %d rows / %.1fs; second half max: buffer %d rows, %d local files, publish lag %d rows / %.1fs; at the end: %+v",
		elapsed.Round(time.Second), float64(appended)/elapsed.Seconds(), b1, f1, l1, s1, b2, f2, l2, s2, last)
	if b2 > 2*max(b1, 1) || f2 > 2*max(f1, 1) {
		b.Errorf("the maintainers fall behind: the second half's maxima (buffer %d, files %d) exceed twice the first's (%d, %d)", b2, f2, b1, f1)
	}
	_ = fmt.Sprint()
}

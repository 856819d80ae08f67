package broker

import (
	"sync"
	"testing"
	"time"
)

// BenchmarkPublishMetrics publishes with metrics enabled and disabled, to
// show what counting costs the hot path (target: within 3%). Run the two
// alternately, several times, and compare medians:
//
//	for i in 1 2 3 4 5; do for m in on off; do
//	  go test ./pkg/broker -run '^$' -bench "PublishMetrics/.*/$m" -count 1
//	done; done
func BenchmarkPublishMetrics(b *testing.B) {
	for _, shape := range []struct {
		name            string
		pubs, rowsFrame int
	}{{"1x1", 1, 1}, {"8x100", 8, 100}} {
		for _, on := range []bool{true, false} {
			name := shape.name + "/off"
			if on {
				name = shape.name + "/on"
			}
			b.Run(name, func(b *testing.B) {
				cfg := testConfig(b)
				cfg.Metrics.Enabled = on
				srv := startServer(b, cfg)
				var ps []*pubConn
				for range shape.pubs {
					ps = append(ps, dialPublisher(b, srv, "trades"))
				}
				frames := b.N/(shape.pubs*shape.rowsFrame) + 1
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for _, p := range ps {
					wg.Add(1)
					go func() { defer wg.Done(); publishPipelined(b, p, frames, shape.rowsFrame, 64) }()
				}
				wg.Wait()
				b.ReportMetric(float64(frames*shape.pubs*shape.rowsFrame)/time.Since(start).Seconds(), "rows/s")
			})
		}
	}
}

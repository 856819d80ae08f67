package metrics

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/wire"
)

// TestHistogramPutsEachDurationInTheFirstBucketAtOrAboveIt: a bucket's
// bound is inclusive (Prometheus's le), the counts are cumulative and the
// total and sum are those of the observations.
func TestHistogramPutsEachDurationInTheFirstBucketAtOrAboveIt(t *testing.T) {
	var h Histogram
	for _, d := range []time.Duration{
		50 * time.Microsecond,  // ≤ 0.0001
		100 * time.Microsecond, // = 0.0001: still the first
		101 * time.Microsecond, // ≤ 0.00025
		3 * time.Millisecond,   // ≤ 0.005
		20 * time.Second,       // +Inf only
	} {
		h.Observe(d)
	}
	n, sum, b := h.snapshot()
	if n != 5 {
		t.Errorf("count %d, want 5", n)
	}
	if want := (50e-6 + 100e-6 + 101e-6 + 3e-3 + 20); sum < want-1e-9 || sum > want+1e-9 {
		t.Errorf("sum %v, want %v", sum, want)
	}
	for ub, want := range map[float64]uint64{0.0001: 2, 0.00025: 3, 0.0025: 3, 0.005: 4, 10: 4} {
		if b[ub] != want {
			t.Errorf("le=%v holds %d, want %d", ub, b[ub], want)
		}
	}
}

// TestHistogramCountsEveryConcurrentObservation: Observe takes no lock,
// and loses no observation to a race.
func TestHistogramCountsEveryConcurrentObservation(t *testing.T) {
	var h Histogram
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				h.Observe(time.Duration(g*1000+i) * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	if n, _, _ := h.snapshot(); n != 8000 {
		t.Fatalf("count %d after 8000 concurrent observations", n)
	}
}

// TestCollectorReportsASampleAndPassesPrometheusLint: every metric of a
// sample is reported under its documented name, and the names, units and
// help texts pass Prometheus's own lint.
func TestCollectorReportsASampleAndPassesPrometheusLint(t *testing.T) {
	m := new(Stream)
	m.RowsCommitted.Add(7)
	m.CommitGroups.Add(2)
	m.CommitLatency.Observe(time.Millisecond)
	m.Closed(wire.CloseTooSlow)
	m.Closed(wire.CloseNotReplayable)
	m.Closed(wire.CloseGoingAway) // not a refusal: not counted
	m.Replayed(&logstore.TierRows{logstore.TierPublished: 3})
	end := int64(8)
	unrouted := new(Stream)
	unrouted.Closed(wire.CloseNoSuchStream)
	c := NewCollector(func() Sample {
		return Sample{
			Streams:         []StreamSample{{Name: "trades", Counters: m, EndOffset: &end, Subscribers: 2, Tiers: &logstore.Status{BufferedRows: 7, PublishLagSecs: 1.5}, Replication: &Replication{Through: 6, LagRows: 1, LagSecs: 0.25}}},
			Unrouted:        unrouted,
			Restarts:        map[string]int64{"seal": 1},
			Unauthenticated: 4,
		}
	})
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	want := `
# HELP streamcast_rows_committed_total Rows committed to the stream's log (fsync done); on a live-only stream, rows accepted and fanned out.
# TYPE streamcast_rows_committed_total counter
streamcast_rows_committed_total{stream="trades"} 7
# HELP streamcast_slow_subscriber_drops_total Subscribers closed with 4429 for falling max_backlog frames behind.
# TYPE streamcast_slow_subscriber_drops_total counter
streamcast_slow_subscriber_drops_total{stream="trades"} 1
# HELP streamcast_maintain_restarts_total Restarts of serve's maintenance child for a role since serve started.
# TYPE streamcast_maintain_restarts_total counter
streamcast_maintain_restarts_total{role="seal"} 1
# HELP streamcast_publish_lag_seconds Age of the oldest row not yet published; 0 when none.
# TYPE streamcast_publish_lag_seconds gauge
streamcast_publish_lag_seconds{stream="trades"} 1.5
# HELP streamcast_replication_lag_rows Rows committed and not yet shipped to the WAL replica.
# TYPE streamcast_replication_lag_rows gauge
streamcast_replication_lag_rows{stream="trades"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"streamcast_rows_committed_total", "streamcast_slow_subscriber_drops_total",
		"streamcast_maintain_restarts_total", "streamcast_publish_lag_seconds",
		"streamcast_replication_lag_rows"); err != nil {
		t.Error(err)
	}
	for name, want := range map[string]float64{
		`streamcast_refusals_total{code="4416",stream="trades"}`: 1,
		`streamcast_refusals_total{code="4404",stream=""}`:       1,
		`streamcast_refusals_total{code="4404",stream="trades"}`: 0,
	} {
		got := gatheredValue(t, reg, name)
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// gatheredValue finds one counter series by its rendering name{labels}.
func gatheredValue(t *testing.T, reg *prometheus.Registry, series string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var parts []string
			for _, l := range m.GetLabel() {
				parts = append(parts, l.GetName()+`="`+l.GetValue()+`"`)
			}
			if f.GetName()+"{"+strings.Join(parts, ",")+"}" == series {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series %s", series)
	return 0
}

// BenchmarkHotPathCounting is what metrics add per publish frame on the
// hot path: a clock read when the frame is read, and at its group's
// ack an Observe of its latency; per group, a clock read, an Observe of
// the commit and two counter adds. Compare with the ns/row of
// BenchmarkPublishMetrics.
func BenchmarkHotPathCounting(b *testing.B) {
	var m Stream
	for b.Loop() {
		read := time.Now()
		began := time.Now()
		m.CommitLatency.Observe(time.Since(began))
		m.RowsCommitted.Add(1)
		m.CommitGroups.Add(1)
		m.AckLatency.Observe(time.Since(read))
	}
}

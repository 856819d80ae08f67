package metrics

import (
	"sync/atomic"
	"time"
)

// latencyBuckets are the upper bounds, in seconds, of the latency
// histograms: from a tenth of a millisecond (a group commit on a fast
// disk) to ten seconds (a stalled disk).
var latencyBuckets = [...]float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10,
}

// latencyBounds are latencyBuckets as durations, for Observe.
var latencyBounds = func() (b [len(latencyBuckets)]time.Duration) {
	for i, s := range latencyBuckets {
		b[i] = time.Duration(s * float64(time.Second))
	}
	return b
}()

// Histogram counts durations into the fixed latency buckets with atomic
// adds only: Observe takes no lock, so the committer and the publishers'
// readers record into it without waiting on each other or on a scrape.
// The zero value is ready to use.
type Histogram struct {
	counts [len(latencyBuckets) + 1]atomic.Uint64 // per bucket (not cumulative); the last is +Inf
	sumNs  atomic.Int64
}

// Observe records one duration.
func (h *Histogram) Observe(d time.Duration) {
	i := 0
	for i < len(latencyBounds) && d > latencyBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
}

// snapshot returns the observation count, the sum in seconds and the
// cumulative count per upper bound. The count is the sum of the buckets
// read, so the histogram a scrape sees is always consistent in itself
// (the sum may run a few observations ahead of or behind it).
func (h *Histogram) snapshot() (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, len(latencyBuckets))
	for i, ub := range latencyBuckets {
		count += h.counts[i].Load()
		buckets[ub] = count
	}
	count += h.counts[len(latencyBuckets)].Load()
	return count, time.Duration(h.sumNs.Load()).Seconds(), buckets
}

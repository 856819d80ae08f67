// Package metrics is serve's Prometheus side: the counters a stream keeps
// on its hot path (Stream, updated with atomics only, never a lock per row
// or per frame), a lock-free latency Histogram, and a Collector that turns
// a Sample of them into Prometheus metrics when /metrics is scraped;
// Handler serves a scrape from a registry of its own, and AuthFailures
// counts the 401s and 403s refused before any stream is chosen.
//
// Counting costs the publish and fan-out paths an atomic add per group or
// per write, never an allocation; everything else (gauges, the tiers'
// figures, the maintenance children's restarts) is read at scrape time.
// The Collector is registered with a registry its server owns, never the
// global one, so one process can run several servers. The package knows
// nothing of connections or logs: pkg/broker fills the Sample. It is its
// own package because the Prometheus side has a small API that reads alone
// (counters in, a scrape out), and keeps client_golang out of the broker's
// hot-path code.
package metrics

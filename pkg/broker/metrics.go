package broker

import (
	"net/http"
	"sync/atomic"

	"github.com/streamcast/streamcast/pkg/broker/metrics"
	"github.com/streamcast/streamcast/pkg/wire"
)

// serverMetrics is what /metrics needs beside each stream's counters: its
// handler (package metrics) and the counters of requests no stream took
// (the children's restarts are supervise.Runner's).
type serverMetrics struct {
	handler  http.Handler
	unrouted metrics.Stream // refusals of requests no served stream took

	authFailures metrics.AuthFailures // RecordAuthFailure
	public       atomic.Bool          // metrics.public; Reload changes it
}

// newServerMetrics builds the handler of s's /metrics.
func newServerMetrics(s *Server) *serverMetrics {
	m := &serverMetrics{}
	m.public.Store(s.cfg.Metrics.Public)
	m.handler = metrics.Handler(s.sampleMetrics)
	return m
}

// RecordAuthFailure counts a request refused before the upgrade with
// status 401 (no or bad credentials) or 403 (no grant) in /metrics'
// streamcast_auth_failures_total; other statuses are not counted. Safe
// from any goroutine; it does nothing while metrics are disabled.
func (s *Server) RecordAuthFailure(status int) {
	if m := s.metrics; m != nil {
		m.authFailures.Record(status)
	}
}

// serveMetrics answers GET /metrics in the Prometheus text format.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if !s.gate.AuthorizeMetrics(w, r, s.metrics.public.Load()) {
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	s.metrics.handler.ServeHTTP(w, r)
}

// sampleMetrics gathers what a scrape reports. The log's tiers are read
// as /stats reads them; everything else is an atomic load.
func (s *Server) sampleMetrics() metrics.Sample {
	m := s.metrics
	out := metrics.Sample{Unrouted: &m.unrouted, Restarts: s.children.Restarts()}
	out.Unauthenticated, out.Forbidden = m.authFailures.Load()
	out.FilterBytes, out.FilterRefusals = s.filters.held.Load(), s.filters.refused.Load()
	out.CompressionBytes, out.CompressionDeferred = s.deflaters.held.Load()*wire.DeflaterBytes, s.deflaters.deferred.Load()
	out.Backoff, out.Busy = m.authFailures.LoadThrottled()
	if ent := s.entry.Load(); ent != nil {
		c := ent.Counts()
		out.Connections, out.RefusedTotal, out.RefusedPerAddr = c.Open, c.RefusedTotal, c.RefusedPerAddr
	}
	for _, st := range s.reg.List() {
		ss := metrics.StreamSample{
			Name:        st.name,
			Counters:    st.m,
			BytesSent:   st.bytesSent.Load(),
			Subscribers: st.subscribers.Load(),
			Publishers:  st.publishers.Load(),
			Tiers:       st.tierStatus(),
		}
		if st.cfg.Durable {
			e := st.endOffset.Load()
			ss.EndOffset = &e
			if l := st.life.tiers.Load(); l != nil && st.cfg.Replicate && ss.Tiers != nil && e != wire.Null {
				// As /stats reads it (Stats), so both show the same lag.
				if r, ok := readReplication(l.Dir(), e, s.opts.Clock.Now()); ok {
					ss.Replication = &r
				}
			}
		}
		out.Streams = append(out.Streams, ss)
	}
	return out
}

// countClose counts a close the server sent on a connection to st (nil: a
// request no served stream took) for /metrics: drops and refusals.
func (s *Server) countClose(st *stream, code int) {
	switch {
	case st != nil && st.m != nil:
		st.m.Closed(code)
	case st == nil && s.metrics != nil:
		s.metrics.unrouted.Closed(code)
	}
}

// AuthorizeMetrics is the access rule of GET /metrics, for its route:
// public (metrics.public: true) lets everyone in; otherwise the request
// needs stats on "*". It answers 401 or 403 itself and returns false when
// the route must not serve r (authGate.AuthorizeMetrics).
func (s *Server) AuthorizeMetrics(w http.ResponseWriter, r *http.Request, public bool) bool {
	return s.gate.AuthorizeMetrics(w, r, public)
}

// AuthFailures counts failed logins since the server started: bad or
// unparsable credentials, not requests refused for lack of a grant.
func (s *Server) AuthFailures() int64 { return s.gate.Failures() }

package broker

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/streamcast/streamcast/pkg/broker/auth"
	"github.com/streamcast/streamcast/pkg/broker/supervise"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// Stats returns the server's stats now.
func (s *Server) Stats() Stats {
	// served_at is on the server's clock, as the rows' stamps and the
	// publish lag are: the console measures how fast the lag grows
	// against it.
	now := s.opts.Clock.Now()
	mono := time.Since(s.started)
	streams := s.reg.List()
	out := Stats{ServedAt: unixSeconds(now), Process: processStats(), Streams: make([]StreamStats, 0, len(streams)), Children: []supervise.ChildStats{}}
	if sup := s.children.Current(); sup != nil {
		out.Children = sup.Stats()
	}
	for _, st := range streams {
		ss := StreamStats{
			Name:        st.name,
			Durable:     st.cfg.Durable,
			Subscribers: st.subscribers.Load(),
			Publishers:  st.publishers.Load(),
			StartedTS:   unixSeconds(s.startedWall),
			UptimeS:     mono.Seconds(),
			BytesSent:   st.bytesSent.Load(),
		}
		if st.cfg.Durable {
			if e := st.endOffset.Load(); e != wire.Null {
				ss.EndOffset = &e
			}
		}
		if last := st.lastSend.Load(); last != 0 {
			at := time.Duration(last)
			ts := unixSeconds(s.startedWall.Add(at))
			age := (mono - at).Seconds()
			if age < 0 {
				age = 0
			}
			ss.LastSendTS, ss.LastSendAgeS = &ts, &age
		}
		if t := st.tierStatus(); t != nil {
			ss.BufferedRows, ss.LocalFiles = &t.BufferedRows, &t.LocalFiles
			ss.PublishedThrough, ss.PublishLagRows, ss.PublishLagS = &t.PublishedThrough, &t.PublishLagRows, &t.PublishLagSecs
			if l := st.life.tiers.Load(); l != nil && st.cfg.Replicate && ss.EndOffset != nil {
				ss.AddReplication(l.Dir(), *ss.EndOffset, now)
			}
		}
		if st.marks != nil {
			ss.ExactlyOnce = st.marks.Committed()
		}
		if st.relay != nil {
			// A relay publishes nothing (its upstream's table is the
			// history): no publish lag to report, only its mirroring.
			ss.Relay = st.relayStats()
			ss.PublishedThrough, ss.PublishLagRows, ss.PublishLagS = nil, nil, nil
		}
		out.Streams = append(out.Streams, ss)
	}
	return out
}

// tierStatus reads the status of a durable stream's log for /stats and
// /metrics; nil on a live-only stream, or when the log cannot be read
// just now (it is closing, say).
func (st *stream) tierStatus() *logstore.Status {
	l := st.life.tiers.Load()
	if l == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	t, err := l.Status(ctx)
	if err != nil {
		return nil
	}
	return &t
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

// serveStats answers GET /stats with what the request's principal may
// see: the streams it holds stats on, and the process-wide figures
// (process, children) only with stats on "*". A principal with stats on
// nothing is refused (401 without credentials, 403 with).
func (s *Server) serveStats(w http.ResponseWriter, r *http.Request) {
	a := auth.AccessOf(r)
	if a.Policy != nil && !a.Policy.AllowsAny(a.Who, config.ActionStats) {
		s.gate.Refuse(w, a, "read /stats")
		return
	}
	writeStats(w, s.Stats(), a.Everywhere(config.ActionStats), func(stream string) bool { return a.Allows(config.ActionStats, stream) })
}

// serveHealth answers GET /health: ready, or 503 while starting or
// stopping.
func (s *Server) serveHealth(w http.ResponseWriter) {
	switch s.state.Load() {
	case stateReady:
		writeHealth(w, "ready")
	case stateStarting:
		writeHealth(w, "starting")
	default:
		writeHealth(w, "stopping")
	}
}

// Committed returns the mark of every publisher id that committed a row,
// sorted by id, for /stats.
func (m *streamMarks[J]) Committed() []PublisherStats {
	m.mu.Lock()
	out := make([]PublisherStats, 0, len(m.pubs))
	for _, ps := range m.pubs {
		if ps.lastSeq > 0 {
			out = append(out, PublisherStats{ID: ps.id, LastSeq: ps.lastSeq, LastOffset: ps.lastOffset, Connected: ps.owner != nil})
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b PublisherStats) int { return strings.Compare(a.ID, b.ID) })
	return out
}

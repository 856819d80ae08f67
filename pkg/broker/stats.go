package broker

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/streamcast/streamcast/internal/rusage"
	"github.com/streamcast/streamcast/pkg/broker/config"
	"github.com/streamcast/streamcast/pkg/broker/supervise"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
	"github.com/streamcast/streamcast/pkg/wire"
)

// StreamStats are the facts /stats reports about one stream: counters only,
// no verdict and no rate (a rate is the difference of two end_offset reads).
type StreamStats struct {
	Name         string   `json:"name"`
	Durable      bool     `json:"durable"`
	EndOffset    *int64   `json:"end_offset"` // nil on a live-only stream
	Subscribers  int64    `json:"subscribers"`
	Publishers   int64    `json:"publishers"`
	StartedTS    float64  `json:"started_ts"`      // wall clock, s since the epoch
	UptimeS      float64  `json:"uptime_s"`        // monotonic
	LastSendTS   *float64 `json:"last_send_ts"`    // nil: nothing sent by this process
	LastSendAgeS *float64 `json:"last_send_age_s"` // monotonic
	BytesSent    int64    `json:"bytes_sent"`      // bytes written to this stream's connections

	// The log's tiers (durable streams; null when live-only, or when the
	// log could not be read just now).
	BufferedRows     *int64   `json:"buffered_rows"`     // rows in buffer.db (some also in files, until clean evicts them)
	LocalFiles       *int64   `json:"local_files"`       // Parquet files under <log>/files/ the log records
	PublishedThrough *int64   `json:"published_through"` // the last offset the published table holds; 0: none
	PublishLagRows   *int64   `json:"publish_lag_rows"`  // rows committed and not yet published
	PublishLagS      *float64 `json:"publish_lag_s"`     // age of the oldest unpublished row; 0 when none

	// WAL replication (replicate: true; null otherwise, and until the
	// replicator's first round).
	ReplicatedThrough  *int64   `json:"replicated_through"`   // the last offset the replica holds; 0: none
	ReplicationLagRows *int64   `json:"replication_lag_rows"` // rows committed and not yet shipped
	ReplicationLagS    *float64 `json:"replication_lag_s"`    // while rows wait: time since the last round that shipped (a bound on their age); 0 when none wait
}

// ProcessStats are facts about the server process, for load tests.
type ProcessStats struct {
	PID        int     `json:"pid"`         // the serve process, for signals (SIGHUP reloads the config)
	CPUSeconds float64 `json:"cpu_seconds"` // user + system CPU time
	RSSBytes   int64   `json:"rss_bytes"`   // resident set size now (peak where "now" is unknown)
	Goroutines int     `json:"goroutines"`
}

// Stats is the /stats document. It is its only definition: the load
// generator (internal/loadgen) decodes /stats into this same type.
type Stats struct {
	ServedAt float64                `json:"served_at"`
	Process  ProcessStats           `json:"process"`
	Streams  []StreamStats          `json:"streams"`
	Children []supervise.ChildStats `json:"children"` // serve's maintenance children; [] when it runs none
}

// Stats returns the server's stats now.
func (s *Server) Stats() Stats {
	now := time.Now()
	mono := time.Since(s.started)
	streams := s.reg.List()
	out := Stats{ServedAt: unixSeconds(now), Process: processStats(), Streams: make([]StreamStats, 0, len(streams)), Children: []supervise.ChildStats{}}
	if sup := s.sup.Load(); sup != nil {
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
				ss.addReplication(l.Dir(), *ss.EndOffset, now)
			}
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

// addReplication fills the replication fields from what the replicator
// last reported in the log's directory; end is the log's end offset now.
func (ss *StreamStats) addReplication(dir string, end int64, now time.Time) {
	p, ok, err := replica.ReadProgress(dir)
	if err != nil || !ok {
		return
	}
	through := p.ShippedEnd - 1
	lag := max(end-p.ShippedEnd, 0)
	var age float64
	if lag > 0 {
		age = max(now.Sub(p.At).Seconds(), 0)
	}
	ss.ReplicatedThrough, ss.ReplicationLagRows, ss.ReplicationLagS = &through, &lag, &age
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

// processStats reads CPU time (rusage.Self) and the current RSS (/proc/self/statm,
// falling back to the peak from rusage.Self where there is no /proc).
func processStats() ProcessStats {
	p := ProcessStats{PID: os.Getpid(), Goroutines: runtime.NumGoroutine()}
	p.CPUSeconds, p.RSSBytes = rusage.Self()
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 2 {
			if pages, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				p.RSSBytes = pages * int64(os.Getpagesize())
			}
		}
	}
	return p
}

// serveStats answers GET /stats with what the request's principal may
// see: the streams it holds stats on, and the process-wide figures
// (process, children) only with stats on "*". A principal with stats on
// nothing is refused (401 without credentials, 403 with).
func (s *Server) serveStats(w http.ResponseWriter, r *http.Request) {
	a := accessOf(r)
	if a.policy != nil && !a.policy.AllowsAny(a.who, config.ActionStats) {
		s.refuseAccess(w, a, "read /stats")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	st := s.Stats()
	if a.everywhere(config.ActionStats) {
		_ = enc.Encode(st)
		return
	}
	// Without stats on "*": the streams granted, and no process figures.
	shown := st.Streams[:0]
	for _, ss := range st.Streams {
		if a.allows(config.ActionStats, ss.Name) {
			shown = append(shown, ss)
		}
	}
	_ = enc.Encode(streamStatsOnly{ServedAt: st.ServedAt, Streams: shown})
}

// streamStatsOnly is /stats for a principal without stats on "*": the
// document's shape without its process-wide parts.
type streamStatsOnly struct {
	ServedAt float64       `json:"served_at"`
	Streams  []StreamStats `json:"streams"`
}

func (s *Server) serveHealth(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	switch s.state.Load() {
	case stateReady:
		_, _ = w.Write([]byte("{\"status\":\"ready\"}\n"))
	case stateStarting:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("{\"status\":\"starting\"}\n"))
	default:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("{\"status\":\"stopping\"}\n"))
	}
}

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
	"github.com/streamcast/streamcast/pkg/broker/supervise"
	"github.com/streamcast/streamcast/pkg/logstore"
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
		if l := st.life.tiers.Load(); l != nil {
			ss.addTiers(l)
		}
		out.Streams = append(out.Streams, ss)
	}
	return out
}

// addTiers fills the tier fields from the log's status; they stay null
// when it cannot be read (the log is closing, say).
func (ss *StreamStats) addTiers(l *logstore.Log) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := l.Status(ctx)
	if err != nil {
		return
	}
	ss.BufferedRows, ss.LocalFiles = &st.BufferedRows, &st.LocalFiles
	ss.PublishedThrough, ss.PublishLagRows, ss.PublishLagS = &st.PublishedThrough, &st.PublishLagRows, &st.PublishLagSecs
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

func (s *Server) serveStats(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s.Stats())
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

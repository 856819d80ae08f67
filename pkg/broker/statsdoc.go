package broker

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/streamcast/streamcast/internal/rusage"
	"github.com/streamcast/streamcast/pkg/broker/metrics"
	"github.com/streamcast/streamcast/pkg/broker/supervise"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
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

	// ExactlyOnce is, on a stream with exactly_once: true, the mark of
	// every publisher id that committed a row, by id; null on any other
	// stream. It has one entry per id ever used, so a stream whose
	// publishers take a fresh id per run makes it long.
	ExactlyOnce []PublisherStats `json:"exactly_once_publishers"`

	// Relay is the mirroring state of a relay stream (upstream: in its
	// config); absent on a stream that takes publishers.
	Relay *RelayStats `json:"relay,omitempty"`
}

// PublisherStats is one exactly-once publisher id's committed mark: the
// last seq committed under it and that row's offset, and whether a
// connection holds the id now.
type PublisherStats struct {
	ID         string `json:"id"`
	LastSeq    int64  `json:"last_seq"`
	LastOffset int64  `json:"last_offset"`
	Connected  bool   `json:"connected"`
}

// RelayStats are the facts /stats reports about a relay stream's mirroring.
// State "stopped" is for good: Error says why (too_old, a gap, another
// stream behind the URL), and nothing is mirrored until serve restarts.
type RelayStats struct {
	Upstream     string  `json:"upstream"`      // the upstream's URL, without credentials
	State        string  `json:"state"`         // connecting | mirroring | stopped
	Error        string  `json:"error"`         // why it last lost or stopped mirroring; "" while mirroring
	SinceTS      float64 `json:"since_ts"`      // wall clock, s since the epoch, of the last state change
	Reconnects   int64   `json:"reconnects"`    // sessions lost since serve started
	RowsMirrored int64   `json:"rows_mirrored"` // rows received from the upstream since serve started
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

// AddReplication fills the replication fields from what the replicator
// last reported in the log's directory; end is the log's end offset now.
func (ss *StreamStats) AddReplication(dir string, end int64, now time.Time) {
	if r, ok := readReplication(dir, end, now); ok {
		ss.ReplicatedThrough, ss.ReplicationLagRows, ss.ReplicationLagS = &r.Through, &r.LagRows, &r.LagSecs
	}
}

// readReplication reads a replicated log's replication figures, for
// /stats and /metrics alike: what the replicator last reported in the
// log's directory dir, against the log's end offset now. ok is false
// until the replicator's first round (or when its report is unreadable).
func readReplication(dir string, end int64, now time.Time) (r metrics.Replication, ok bool) {
	p, ok, err := replica.ReadProgress(dir)
	if err != nil || !ok {
		return r, false
	}
	r.Through = p.ShippedEnd - 1
	r.LagRows = max(end-p.ShippedEnd, 0)
	if r.LagRows > 0 {
		r.LagSecs = max(now.Sub(p.At).Seconds(), 0)
	}
	return r, true
}

// processStats reads the process figures now: CPU time (rusage.Self) and the current RSS (/proc/self/statm,
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

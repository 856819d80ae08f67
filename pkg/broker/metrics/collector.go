package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamcast/streamcast/pkg/logstore"
)

// Sample is what one scrape reports, gathered by pkg/broker when /metrics
// is read.
type Sample struct {
	Streams []StreamSample
	// FilterBytes is the memory the subscribers' compiled where= filters
	// hold now (limits.max_filter_bytes bounds it); FilterRefusals counts
	// the subscribers refused (1013) because theirs would pass the bound.
	FilterBytes, FilterRefusals int64
	// CompressionBytes is the memory the permessage-deflate compressors
	// hold now (limits.max_compression_bytes bounds it);
	// CompressionDeferred counts the subscribers and replays that got plain
	// frames because a compressor would pass the bound.
	CompressionBytes, CompressionDeferred int64
	// Unrouted holds the refusals of requests no served stream took (4404,
	// a 4400 for a path that names no stream): reported with stream="".
	// Only its refusals are read.
	Unrouted *Stream
	// Restarts counts, by maintenance role, the restarts of serve's child
	// for that role since serve started.
	Restarts map[string]int64
	// Unauthenticated and Forbidden count requests refused with 401 and
	// 403 before the upgrade; Backoff and Busy those refused with 429 (a
	// login serving its backoff) and 503 (too many logins checked at once).
	Unauthenticated, Forbidden, Backoff, Busy int64
	// Connections is the TCP connections open now; RefusedTotal and
	// RefusedPerAddr count those closed at accept for limits.max_connections
	// and limits.max_connections_per_address.
	Connections, RefusedTotal, RefusedPerAddr int64
}

// StreamSample is one stream's figures at the scrape.
type StreamSample struct {
	Name     string
	Counters *Stream // never nil
	// BytesSent counts every byte written to the stream's connections.
	BytesSent               int64
	Subscribers, Publishers int64
	// EndOffset is the frontier of a durable stream; nil on a live-only one.
	EndOffset *int64
	// Tiers is the log's status; nil on a live-only stream, or when the
	// log could not be read in time (its gauges are then left out rather
	// than reported as zero).
	Tiers *logstore.Status
	// Replication is the WAL replication of a stream with replicate: true,
	// as /stats reports it; nil on any other stream, and until the
	// replicator's first round.
	Replication *Replication
}

// Replication is what a replicated log's replicator last reported, against
// the log's end now.
type Replication struct {
	// Through is the last offset the replica holds; 0 when none.
	Through int64
	// LagRows is the rows committed and not yet shipped.
	LagRows int64
	// LagSecs is, while rows wait, the time since the last round that
	// shipped (a bound on their age); 0 when none wait.
	LagSecs float64
}

// Collector is a prometheus.Collector reading a Sample at every scrape.
// It holds no metric state of its own: the counters live where the hot
// path updates them.
type Collector struct {
	sample func() Sample

	rows, groups, commitLat, ackLat, frames, bytes *prometheus.Desc
	subs, pubs, drops, refusals, replayed, endOff  *prometheus.Desc
	buffered, files, pubThrough, lagRows, lagSecs  *prometheus.Desc
	replThrough, replLagRows, replLagSecs          *prometheus.Desc
	filterBytes, filterDenied                      *prometheus.Desc
	compressionBytes, compressionDeferred          *prometheus.Desc
	restarts, authFailures, conns, connsRefused    *prometheus.Desc
}

// NewCollector returns a Collector that calls sample at every scrape.
func NewCollector(sample func() Sample) *Collector {
	stream := []string{"stream"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("streamcast_"+name, help, labels, nil)
	}
	return &Collector{
		sample:              sample,
		rows:                d("rows_committed_total", "Rows committed to the stream's log (fsync done); on a live-only stream, rows accepted and fanned out.", stream...),
		groups:              d("commit_groups_total", "Commits (group commits) that carried the rows.", stream...),
		commitLat:           d("commit_seconds", "Time to append one commit group to the log, fsync included.", stream...),
		ackLat:              d("ack_seconds", "Time from reading a publish frame to queueing its reply (validation, inbox wait, commit, fan-out).", stream...),
		frames:              d("frames_delivered_total", "Data frames written to subscribers, replayed and live.", stream...),
		bytes:               d("bytes_sent_total", "Bytes written to the stream's connections (frames, replies, greetings, control frames).", stream...),
		subs:                d("subscribers", "Subscribers connected now.", stream...),
		pubs:                d("publishers", "Publishers connected now.", stream...),
		drops:               d("slow_subscriber_drops_total", "Subscribers closed with 4429 for falling max_backlog frames behind.", stream...),
		refusals:            d("refusals_total", "Connections closed with a refusal, by close code (1009, 4400, 4404, 4409, 4410, 4412, 4416); stream is empty for a request no served stream took.", "stream", "code"),
		replayed:            d("rows_replayed_total", "Rows replayed to subscribers, by the tier they were read from (buffer, local, published).", "stream", "tier"),
		endOff:              d("end_offset", "The offset the stream's next row gets (durable streams).", stream...),
		buffered:            d("buffered_rows", "Rows in the log's SQLite buffer (some also in files until clean evicts them).", stream...),
		files:               d("local_files", "Parquet files under the log's files/ directory.", stream...),
		pubThrough:          d("published_through", "The last offset the published Iceberg table holds; 0 when none.", stream...),
		lagRows:             d("publish_lag_rows", "Rows committed and not yet published.", stream...),
		lagSecs:             d("publish_lag_seconds", "Age of the oldest row not yet published; 0 when none.", stream...),
		replThrough:         d("replicated_through", "The last offset the WAL replica holds; 0 when none (streams with replicate: true).", stream...),
		replLagRows:         d("replication_lag_rows", "Rows committed and not yet shipped to the WAL replica.", stream...),
		replLagSecs:         d("replication_lag_seconds", "While rows wait to be shipped to the WAL replica, the time since the last round that shipped (a bound on their age); 0 when none wait.", stream...),
		filterBytes:         d("filter_bytes", "Bytes the subscribers' compiled where= filters hold now, identical filters counted once (bounded by limits.max_filter_bytes)."),
		filterDenied:        d("filter_refusals_total", "Subscribers refused with 1013 because their where= filter would take the filters' memory over limits.max_filter_bytes."),
		compressionBytes:    d("compression_bytes", "Bytes the permessage-deflate compressors hold now, one per group of live subscribers sharing a stream and a filter and one per compressed replay (bounded by limits.max_compression_bytes)."),
		compressionDeferred: d("compression_deferred_total", "Subscribers and replays that received plain frames because another compressor would take the compressors' memory over limits.max_compression_bytes."),
		restarts:            d("maintain_restarts_total", "Restarts of serve's maintenance child for a role since serve started.", "role"),
		conns:               d("connections", "TCP connections open now, WebSocket ones included."),
		connsRefused:        d("connections_refused_total", "Connections closed at accept for a bound: total (limits.max_connections) or address (limits.max_connections_per_address).", "reason"),
		authFailures:        d("auth_failures_total", "Requests refused before the upgrade: unauthenticated (401), forbidden (403), backoff (429: a login failing too often) or busy (503: too many logins checked at once).", "reason"),
	}
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.rows, c.groups, c.commitLat, c.ackLat, c.frames, c.bytes,
		c.subs, c.pubs, c.drops, c.refusals, c.replayed, c.endOff,
		c.buffered, c.files, c.pubThrough, c.lagRows, c.lagSecs,
		c.replThrough, c.replLagRows, c.replLagSecs,
		c.filterBytes, c.filterDenied,
		c.compressionBytes, c.compressionDeferred,
		c.restarts, c.authFailures, c.conns, c.connsRefused,
	} {
		ch <- d
	}
}

// Collect reads a Sample and sends its metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.sample()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	hist := func(d *prometheus.Desc, h *Histogram, labels ...string) {
		n, sum, b := h.snapshot()
		ch <- prometheus.MustNewConstHistogram(d, n, sum, b, labels...)
	}
	for _, st := range s.Streams {
		m, name := st.Counters, st.Name
		counter(c.rows, m.RowsCommitted.Load(), name)
		counter(c.groups, m.CommitGroups.Load(), name)
		hist(c.commitLat, &m.CommitLatency, name)
		hist(c.ackLat, &m.AckLatency, name)
		counter(c.frames, m.FramesDelivered.Load(), name)
		counter(c.bytes, st.BytesSent, name)
		gauge(c.subs, float64(st.Subscribers), name)
		gauge(c.pubs, float64(st.Publishers), name)
		counter(c.drops, m.drops.Load(), name)
		c.collectRefusals(ch, m, name)
		for t := range logstore.NumTiers {
			counter(c.replayed, m.replayed[t].Load(), name, t.String())
		}
		if st.EndOffset != nil {
			gauge(c.endOff, float64(*st.EndOffset), name)
		}
		if t := st.Tiers; t != nil {
			gauge(c.buffered, float64(t.BufferedRows), name)
			gauge(c.files, float64(t.LocalFiles), name)
			gauge(c.pubThrough, float64(t.PublishedThrough), name)
			gauge(c.lagRows, float64(t.PublishLagRows), name)
			gauge(c.lagSecs, t.PublishLagSecs, name)
		}
		if r := st.Replication; r != nil {
			gauge(c.replThrough, float64(r.Through), name)
			gauge(c.replLagRows, float64(r.LagRows), name)
			gauge(c.replLagSecs, r.LagSecs, name)
		}
	}
	if s.Unrouted != nil {
		c.collectRefusals(ch, s.Unrouted, "")
	}
	gauge(c.filterBytes, float64(s.FilterBytes))
	counter(c.filterDenied, s.FilterRefusals)
	gauge(c.compressionBytes, float64(s.CompressionBytes))
	counter(c.compressionDeferred, s.CompressionDeferred)
	for role, n := range s.Restarts {
		counter(c.restarts, n, role)
	}
	counter(c.authFailures, s.Unauthenticated, "unauthenticated")
	counter(c.authFailures, s.Forbidden, "forbidden")
	counter(c.authFailures, s.Backoff, "backoff")
	counter(c.authFailures, s.Busy, "busy")
	gauge(c.conns, float64(s.Connections))
	counter(c.connsRefused, s.RefusedTotal, "total")
	counter(c.connsRefused, s.RefusedPerAddr, "address")
}

// collectRefusals sends m's refusals, one series per code.
func (c *Collector) collectRefusals(ch chan<- prometheus.Metric, m *Stream, name string) {
	for i, code := range refusalCodes {
		ch <- prometheus.MustNewConstMetric(c.refusals, prometheus.CounterValue, float64(m.refusals[i].Load()), name, strconv.Itoa(code))
	}
}

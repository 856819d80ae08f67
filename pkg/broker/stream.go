package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamcast/streamcast/pkg/broker/metrics"
	"github.com/streamcast/streamcast/pkg/broker/relay"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// stream is one served stream: its log (durable streams), its committer's
// inbox, and the set of subscribers its commits fan out to.
type stream struct {
	srv        *Server
	cfg        config.Stream
	name       string
	sch        *schema.Schema
	limits     config.Limits
	log        *logstore.Log // nil on a live-only stream
	schemaJSON []byte        // the greeting's schema; nil = no schema

	// meta is the stream's metadata as open read it (nil on a live-only
	// stream), and metaURI and hintURI the published plain copy and hint
	// the greeting names. Read once, never per connection.
	meta             *meta.Metadata
	metaURI, hintURI string

	// storage is the config a registered stream's log lives by (its
	// control profile's root, published, s3 and tiers); nil for a stream
	// of the config's streams: list, which uses the server's.
	storage *config.Config

	inbox commitInbox[*job] // durable streams: rows waiting for the committer
	life  streamLife        // its connections and committer, for starting and stopping it (registry.go)

	// marks is the exactly-once state of a stream declared exactly_once
	// (nil otherwise); set by open, before the committer starts.
	marks *streamMarks[*job]

	// relay mirrors the upstream of a relay stream (upstream: in its
	// config); nil on a stream that takes publishers. Set by open.
	relay *relay.Follower

	// mu is the fan-out lock. Advancing end and offering a commit's frames to
	// every subscriber happen under it as one step, and so do adding a
	// subscriber and reading end (I2): a subscriber attaching between a commit
	// and its fan-out would otherwise either miss those rows or get them twice.
	mu   sync.Mutex
	end  int64         // frontier: the offset the next row gets (durable only)
	subs []*subscriber // attached subscribers; subscriber.idx is the position
	// deflate is the compressing subscribers' groups: a group compresses
	// each delivery under this lock, so its frames go to its members in
	// the order it compressed them.
	deflate deflateGroups

	// Stats, read without the lock.
	endOffset   atomic.Int64 // copy of end for /stats
	subscribers atomic.Int64
	publishers  atomic.Int64
	bytesSent   atomic.Int64
	lastSend    atomic.Int64 // monotonic ns since srv.started of the last delivery; 0 = none

	// m is the stream's counters for /metrics; nil when metrics are
	// disabled.
	m *metrics.Stream
}

func newStream(srv *Server, cfg config.Stream, sch *schema.Schema, limits config.Limits) *stream {
	s := &stream{srv: srv, cfg: cfg, name: cfg.Name, sch: sch, limits: limits}
	if !sch.IsAny() {
		s.schemaJSON = sch.JSON()
	}
	s.inbox.Init(limits.MaxInbound)
	s.deflate.perConn = srv.opts.deflatePerConn
	s.deflate.budget = srv.deflaters
	if srv.metrics != nil {
		s.m = new(metrics.Stream)
	}
	return s
}

// open opens a durable stream's current log for writing and reads its
// frontier (openStreamLog: the metadata decides which log, I8); a
// live-only stream has nothing to open. The metadata is read here, once,
// and cached for every greeting.
func (s *stream) open(ctx context.Context, root string) error {
	if s.cfg.IsRelay() {
		return s.openRelay(ctx, root)
	}
	if !s.cfg.Durable {
		if s.cfg.ExactlyOnce {
			return fmt.Errorf("stream %q has exactly_once: true but durable: false; publisher marks are committed "+
				"with the rows in the stream's log, so make it durable or drop exactly_once", s.name)
		}
		s.end = wire.Null
		s.endOffset.Store(wire.Null)
		return nil
	}
	return s.openLog(ctx, root)
}

// openLog opens a durable stream's log (open, openRelay).
func (s *stream) openLog(ctx context.Context, root string) error {
	return s.openLogWith(ctx, root, nil)
}

// logSpec is what openStreamLog needs to open the stream's log.
func (s *stream) logSpec() logSpec {
	return logSpec{Stream: s.cfg, Schema: s.sch, Server: s.storageConfig(), Clock: s.srv.opts.Clock, Logger: s.srv.logger}
}

// openLogWith is openLog taking over lg, the current log already open as
// the Writer (a migration's new log), when it is not nil: checked as an
// opened one, and closed on an error.
func (s *stream) openLogWith(ctx context.Context, root string, lg *logstore.Log) error {
	sp := s.logSpec()
	sp.Log = lg
	o, err := openStreamLog(ctx, root, sp)
	if err != nil {
		return err
	}
	lg, end, md := o.Log, o.End, o.Meta
	if s.cfg.ExactlyOnce {
		stored, err := lg.Marks(ctx)
		if err != nil {
			_ = lg.Close()
			return fmt.Errorf("stream %q: read the exactly-once marks of %s: %w", s.name, lg.Dir(), err)
		}
		s.marks = newStreamMarks[*job](stored)
	}
	s.log = lg
	s.end = end
	s.endOffset.Store(end)
	s.meta = md
	s.metaURI, s.hintURI = o.MetaURI, o.HintURI
	return nil
}

// storageConfig is the config the stream's log lives by.
func (s *stream) storageConfig() *config.Config {
	if s.storage != nil {
		return s.storage
	}
	return &s.srv.cfg
}

// retirement returns the stream's retirement, or nil while it takes rows.
func (s *stream) retirement() *meta.Retirement {
	if s.meta == nil {
		return nil
	}
	return s.meta.Retirement
}

// closeLog closes the log; the committer must have stopped.
func (s *stream) closeLog() error {
	if s.log == nil {
		return nil
	}
	err := s.log.Close()
	s.log = nil
	return err
}

// deliver publishes committed (or, on a live-only stream, validated) rows to
// every subscriber: under the fan-out lock the frontier moves to next and each
// subscriber's queue gets the frames its filter takes. It never blocks on a
// subscriber (I5). first is the offset of rows[0] (wire.Null when live-only).
func (s *stream) deliver(frames, rows [][]byte, first, next int64) {
	s.deliverStamped(frames, rows, first, next, 0)
}

// deliverStamped is deliver for a caller that encodes frames only when a
// subscriber may take them (encodeIfWatched): frames nil means not encoded,
// and they are encoded here, from rows and stamp ts, if a subscriber
// attached meanwhile. A group nobody watches costs no encoding.
func (s *stream) deliverStamped(frames, rows [][]byte, first, next, ts int64) {
	s.mu.Lock()
	if frames == nil && len(s.subs) > 0 {
		frames = wire.EncodeDataFrames(rows, first, ts)
	}
	if first != wire.Null {
		s.end = next
		s.endOffset.Store(next)
	}
	z := &s.deflate
	if z.byKey != nil {
		z.admit()
	}
	var matches map[*schema.Filter][]bool
	for _, sub := range s.subs {
		if sub.filter == nil {
			f := frames
			if sub.group != nil {
				f = z.frames(sub.group, frames, nil)
			}
			sub.offer(f, nil, first, next)
			continue
		}
		m, ok := matches[sub.filter]
		if !ok {
			if matches == nil {
				matches = map[*schema.Filter][]bool{}
			}
			m = make([]bool, len(rows))
			for i, r := range rows {
				m[i] = sub.filter.MatchCanonical(r)
			}
			matches[sub.filter] = m
		}
		f := frames
		if sub.group != nil {
			f = z.frames(sub.group, frames, m)
		}
		sub.offer(f, m, first, next)
	}
	if z.byKey != nil {
		z.forget()
	}
	s.mu.Unlock()
	s.lastSend.Store(int64(time.Since(s.srv.started)) | 1)
}

// attachLocked adds sub to the fan-out set; s.mu is held. Subscribers
// with the same where= hold the same *schema.Filter (the server's
// filterCache), so a commit evaluates each distinct predicate once per
// row, however many subscribers use it (deliverStamped).
func (s *stream) attachLocked(sub *subscriber) {
	sub.idx = len(s.subs)
	s.subs = append(s.subs, sub)
	s.subscribers.Add(1)
	if sub.c.deflate == deflateContext {
		s.deflate.add(sub)
	}
}

// detach removes sub from the fan-out set (a no-op when sub is not in it)
// and lets go of its hold on its filter, once, whether or not it was ever
// attached: the filter's memory is counted against
// limits.max_filter_bytes until then.
func (s *stream) detach(sub *subscriber) {
	s.mu.Lock()
	held := sub.held
	sub.held = nil
	if i := sub.idx; i >= 0 && i < len(s.subs) && s.subs[i] == sub {
		last := len(s.subs) - 1
		s.subs[i] = s.subs[last]
		s.subs[i].idx = i
		s.subs[last] = nil
		s.subs = s.subs[:last]
		sub.idx = -1
		s.subscribers.Add(-1)
		s.deflate.remove(sub)
	}
	s.mu.Unlock()
	s.srv.filters.releaseFilter(held)
}

// greeting returns the greeting for a connection to this stream.
func (s *stream) greeting(frontier int64, replay *wire.Range, where []byte) []byte {
	return s.greetingWith(frontier, replay, where, nil)
}

// greetingWith is greeting, carrying an exactly-once publisher's mark.
func (s *stream) greetingWith(frontier int64, replay *wire.Range, where []byte, mark *wire.PublisherMark) []byte {
	g := wire.Greeting{
		Streamcast:  wire.Protocol,
		Stream:      s.name,
		EndOffset:   frontier,
		Replay:      replay,
		Durable:     s.cfg.Durable,
		GroupCommit: s.cfg.Durable && s.cfg.GroupCommit,
		Schema:      s.schemaJSON,
		Where:       where,
		Publisher:   mark,
	}
	if s.meta != nil {
		g.StreamID, g.Metadata, g.MetadataHint = s.meta.StreamID, s.metaURI, s.hintURI
	}
	if r := s.relay; r != nil {
		// A relay's identity and history are its upstream's.
		g.StreamID, g.Metadata, g.MetadataHint = r.Identity()
	}
	return wire.TextFrame(g.AppendJSON(nil))
}

// maxReplay returns the stream's max_replay, or -1 when unbounded.
func (s *stream) maxReplay() int64 {
	if s.cfg.MaxReplay == nil {
		return -1
	}
	return *s.cfg.MaxReplay
}

// itoa is strconv.FormatInt in base 10.
func itoa(v int64) string { return strconv.FormatInt(v, 10) }

package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamcast/streamcast/pkg/broker/config"
	"github.com/streamcast/streamcast/pkg/broker/frame"
	"github.com/streamcast/streamcast/pkg/broker/marks"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
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

	inbox inbox      // durable streams: rows waiting for the committer
	life  streamLife // its connections and committer, for starting and stopping it (registry.go)

	// marks is the exactly-once state of a stream declared exactly_once
	// (nil otherwise); set by open, before the committer starts.
	marks *marks.Marks[*job]

	// mu is the fan-out lock. Advancing end and offering a commit's frames to
	// every subscriber happen under it as one step, and so do adding a
	// subscriber and reading end (I2): a subscriber attaching between a commit
	// and its fan-out would otherwise either miss those rows or get them twice.
	mu      sync.Mutex
	end     int64         // frontier: the offset the next row gets (durable only)
	subs    []*subscriber // attached subscribers; subscriber.idx is the position
	filters map[string]*sharedFilter

	// Stats, read without the lock.
	endOffset   atomic.Int64 // copy of end for /stats
	subscribers atomic.Int64
	publishers  atomic.Int64
	bytesSent   atomic.Int64
	lastSend    atomic.Int64 // monotonic ns since srv.started of the last delivery; 0 = none
}

// sharedFilter interns identical where= filters so a commit evaluates each
// distinct predicate once per row, however many subscribers use it.
type sharedFilter struct {
	f    *schema.Filter
	refs int
}

func newStream(srv *Server, cfg config.Stream, sch *schema.Schema, limits config.Limits) *stream {
	s := &stream{srv: srv, cfg: cfg, name: cfg.Name, sch: sch, limits: limits, filters: map[string]*sharedFilter{}}
	if !sch.IsAny() {
		s.schemaJSON = sch.JSON()
	}
	s.inbox.init(limits.MaxInbound)
	return s
}

// open opens a durable stream's current log for writing and reads its
// frontier; a live-only stream has nothing to open. Which log is current
// comes from the stream's metadata, resolved without ever minting an
// identity over history that exists (meta.Resolve, I8): a stream with
// nothing anywhere gets its first log and its first metadata (published
// copy first); otherwise the log the metadata names is opened, never
// created. The metadata is read here, once, and cached for every greeting.
func (s *stream) open(ctx context.Context, root string) error {
	if !s.cfg.Durable {
		if s.cfg.ExactlyOnce {
			return fmt.Errorf("stream %q has exactly_once: true but durable: false; publisher marks are committed "+
				"with the rows in the stream's log, so make it durable or drop exactly_once", s.name)
		}
		s.end = wire.Null
		s.endOffset.Store(wire.Null)
		return nil
	}
	srvCfg := &s.srv.cfg
	lay, err := meta.NewLayout(root, srvCfg.Published)
	if err != nil {
		return fmt.Errorf("stream %q: %w", s.name, config.PublishedError(err))
	}
	// A log already here must publish where the config says, and reach S3
	// as it says, before its stream's metadata is looked for there: the
	// metadata is read and written at the configured prefix.
	if err := s.checkStoredFirst(lay); err != nil {
		return err
	}
	store, err := meta.NewStore(ctx, lay, s.name, warehouse.S3(srvCfg.S3))
	if err != nil {
		return err
	}
	res, err := meta.Resolve(ctx, store)
	if err != nil {
		return err
	}
	if res.Warning != nil {
		s.srv.logger.Warn("the stream serves from its home's metadata; its published copy is not current", "stream", s.name, "err", res.Warning)
	}
	if res.Outcome != meta.Found && res.Outcome != meta.Absent {
		s.srv.logger.Info("stream metadata "+res.Outcome.String(), "stream", s.name, "stream_id", res.Metadata.StreamID, "metadata", store.PublishedURI())
	}
	clock := logstore.WithClock(s.srv.opts.Clock)
	md := res.Metadata
	var lg *logstore.Log
	if md == nil {
		if g := s.historyGuard(); g != nil {
			return g.RefuseNew(s.srv.cfg.Root, store.PublishedURI())
		}
		// Nothing of the stream anywhere: its first log, then the metadata
		// naming it. A crash in between leaves a log without metadata,
		// which the next start records (meta.Upgraded).
		name := meta.LogName(s.name, 1)
		dir := lay.LogDir(s.name, name)
		// A new log stores where it publishes, how to reach S3 and its
		// tier settings, for its life and for every process that
		// maintains it: serve's children read them from the log.
		lc, err := srvCfg.LogSettings(s.cfg, name)
		if err != nil {
			return fmt.Errorf("stream %q: %w", s.name, err)
		}
		if err := os.MkdirAll(lay.StreamDir(s.name), 0o755); err != nil {
			return fmt.Errorf("stream %q: %w", s.name, err)
		}
		lg, err = logstore.Create(dir, s.sch, lc, clock)
		if err != nil {
			return fmt.Errorf("stream %q: %w", s.name, err)
		}
		if md, err = store.CommitFirst(ctx, lg); err != nil {
			_ = lg.Close()
			return fmt.Errorf("stream %q: write its first metadata: %w", s.name, err)
		}
		s.srv.logger.Info("new stream: its identity is minted", "stream", s.name, "stream_id", md.StreamID, "metadata", store.PublishedURI())
	} else {
		if in := md.Intent; in != nil && (in.Kind == lifecycle.KindMigrate || in.Kind == lifecycle.KindRetire) {
			// The current log may be fenced and its successor half made:
			// the command that recorded the intent finishes it, offline.
			return fmt.Errorf("stream %q: a %s of it was interrupted (its intent is recorded in metadata version %d); run `streamcast %s %s` to finish it, then serve again",
				s.name, in.Kind, md.Version, in.Kind, s.name)
		}
		cur := md.Current()
		if cur == nil {
			return fmt.Errorf("stream %q: its metadata %s (version %d) names no log; restore the stream's home directory from a backup", s.name, store.HomeURI(), md.Version)
		}
		dir := lay.LogDir(s.name, cur.Name)
		lg, err = logstore.Open(dir, logstore.Writer, clock)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("stream %q: its metadata %s (version %d) names log %s as current, but %s holds no log; "+
				"a log is never created afresh under metadata that names it (docs/design.md I8): restore that directory from a backup",
				s.name, store.HomeURI(), md.Version, cur.Name, dir)
		}
		if err != nil {
			return fmt.Errorf("stream %q: %w", s.name, err)
		}
		if err := md.CheckLive(lg); err != nil {
			_ = lg.Close()
			return err
		}
	}
	dir := lg.Dir()
	if got, want := string(lg.Schema().JSON()), string(s.sch.JSON()); got != want || lg.Schema().IsAny() != s.sch.IsAny() {
		_ = lg.Close()
		return fmt.Errorf("stream %q: the log at %s was created with another schema than the config declares; "+
			"a log's schema never changes: stop the server and run streamcast migrate %s to continue the stream in a new log with the new schema, "+
			"or put the schema the log was created with back in the config (log has %s, config has %s)", s.name, dir, s.name, clip(got, 200), clip(want, 200))
	}
	warns, err := srvCfg.CheckStored(s.cfg, dir, lg.Config())
	if err != nil {
		_ = lg.Close()
		return fmt.Errorf("stream %q: %w", s.name, err)
	}
	if len(warns) > 0 {
		s.srv.logger.Warn("the log keeps the sizes and sort order it was created with; the config's retention and grace settings still apply through serve's maintain children",
			"stream", s.name, "log", dir, "differences", strings.Join(warns, "; "))
	}
	earliest, end, err := lg.Extent(ctx)
	if err != nil {
		_ = lg.Close()
		return fmt.Errorf("stream %q: read the extent of %s: %w", s.name, dir, err)
	}
	// A protected stream is checked before any traffic reaches it.
	if g := s.historyGuard(); g != nil {
		if err := g.Check(ctx, md, lg, earliest, end); err != nil {
			_ = lg.Close()
			return err
		}
	}
	if s.cfg.ExactlyOnce {
		stored, err := lg.Marks(ctx)
		if err != nil {
			_ = lg.Close()
			return fmt.Errorf("stream %q: read the exactly-once marks of %s: %w", s.name, dir, err)
		}
		s.marks = marks.New[*job](stored)
	}
	s.log = lg
	s.end = end
	s.endOffset.Store(end)
	s.meta = md
	s.metaURI, s.hintURI = store.PublishedURI(), store.PublishedHintURI()
	return nil
}

// checkStoredFirst refuses the config when the newest log in the
// stream's home stores another published prefix or other S3 settings
// (config.CheckStored); the warnings wait for the open of the current log.
func (s *stream) checkStoredFirst(lay meta.Layout) error {
	logs, err := meta.LocalLogs(lay, s.name)
	if err != nil || len(logs) == 0 {
		return err
	}
	dir := lay.LogDir(s.name, logs[len(logs)-1])
	lg, err := logstore.Open(dir, logstore.ReadOnly)
	if err != nil {
		return fmt.Errorf("stream %q: %w", s.name, err)
	}
	defer lg.Close()
	if _, err := s.srv.cfg.CheckStored(s.cfg, dir, lg.Config()); err != nil {
		return fmt.Errorf("stream %q: %w", s.name, err)
	}
	return nil
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

// historyGuard is the stream's history_guard as meta checks it (package
// meta, Guard); nil when the stream has none.
func (s *stream) historyGuard() *meta.Guard {
	g := s.cfg.HistoryGuard
	if g == nil {
		return nil
	}
	return &meta.Guard{Stream: s.name, StreamID: g.StreamID, KnownOffset: g.KnownOffset, KnownRow: string(g.KnownRow)}
}

// clip shortens s for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// deliver publishes committed (or, on a live-only stream, validated) rows to
// every subscriber: under the fan-out lock the frontier moves to next and each
// subscriber's queue gets the frames its filter takes. It never blocks on a
// subscriber (I5). first is the offset of rows[0] (wire.Null when live-only).
func (s *stream) deliver(frames, rows [][]byte, first, next int64) {
	s.mu.Lock()
	if first != wire.Null {
		s.end = next
		s.endOffset.Store(next)
	}
	var matches map[*schema.Filter][]bool
	for _, sub := range s.subs {
		if sub.filter == nil {
			sub.offer(frames, nil, first, next)
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
		sub.offer(frames, m, first, next)
	}
	s.mu.Unlock()
	s.lastSend.Store(int64(time.Since(s.srv.started)) | 1)
}

// attachLocked adds sub to the fan-out set; s.mu is held.
func (s *stream) attachLocked(sub *subscriber) {
	sub.idx = len(s.subs)
	s.subs = append(s.subs, sub)
	if sub.filter != nil {
		key := string(sub.filter.JSON())
		if sf, ok := s.filters[key]; ok {
			sf.refs++
			sub.filter = sf.f
		} else {
			s.filters[key] = &sharedFilter{f: sub.filter, refs: 1}
		}
	}
	s.subscribers.Add(1)
}

// detach removes sub from the fan-out set; it is a no-op when sub is not in it.
func (s *stream) detach(sub *subscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sub.idx
	if i < 0 || i >= len(s.subs) || s.subs[i] != sub {
		return
	}
	last := len(s.subs) - 1
	s.subs[i] = s.subs[last]
	s.subs[i].idx = i
	s.subs[last] = nil
	s.subs = s.subs[:last]
	sub.idx = -1
	if sub.filter != nil {
		key := string(sub.filter.JSON())
		if sf, ok := s.filters[key]; ok {
			if sf.refs--; sf.refs <= 0 {
				delete(s.filters, key)
			}
		}
	}
	s.subscribers.Add(-1)
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
	return frame.Text(g.AppendJSON(nil))
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

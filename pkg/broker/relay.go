package broker

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"

	"github.com/streamcast/streamcast/pkg/broker/relay"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// A relay stream (upstream: in its config) mirrors a stream of another
// server through a relay.Follower, which subscribes there from the stream's
// own end. What arrives is committed to the stream's log at the same
// offsets, with the same stamps and row bytes (logstore.AppendAt), and
// fanned out like any committed group, so its subscribers get frames
// byte-identical to the upstream's and can move between the nodes,
// resuming by offset. This file is the glue: relayTarget gives the
// follower the stream's log and fan-out.

// openRelay prepares a relay stream: it reads the upstream's greeting for
// the schema and identity the relay serves, then opens the stream's log
// (durable relays). A relay's log is a cache, not a stream of its own: it
// gets no stream metadata (that names a stream's own identity, and its
// copy lives under published:, where a relay writes nothing), only the
// upstream's stream_id kept beside it (openCacheLog) so that a
// restart against another stream behind the URL stops loudly rather than
// mix two streams' offsets (I8).
func (s *stream) openRelay(ctx context.Context, root string) error {
	clean, cred, err := s.cfg.UpstreamURL()
	if err != nil {
		return fmt.Errorf("stream %q: upstream: %w", s.name, err)
	}
	if cred == nil {
		cred = s.srv.opts.UpstreamCredentials
	}
	tlsCfg, err := s.cfg.UpstreamTLS()
	if err != nil {
		return fmt.Errorf("stream %q: %w", s.name, err)
	}
	lay, err := meta.NewLayout(root, s.storageConfig().Published)
	if err != nil {
		return fmt.Errorf("stream %q: %w", s.name, config.PublishedError(err))
	}
	home := lay.StreamDir(s.name)
	dir := lay.LogDir(s.name, meta.LogName(s.name, 1))
	var lg *logstore.Log
	var kept string // the upstream stream_id recorded beside the log
	if s.cfg.Durable {
		if lg, kept, err = openCacheLog(ctx, dir, home, s.name, s.srv.opts.Clock); err != nil {
			return fmt.Errorf("stream %q: %w", s.name, err)
		}
	}
	closeLog := func() {
		if lg != nil {
			_ = lg.Close()
		}
	}
	r := relay.New(relay.Config{
		URL:         clean,
		Credentials: cred,
		TLS:         tlsCfg,
		StreamID:    kept,
		Home:        home,
		Self:        s.srv.id + "/" + s.name,
		MaxGroup:    maxGroupRows,
		Logger:      s.srv.logger.With("stream", s.name, "upstream", clean),
	})
	g, err := r.Open(ctx)
	if errors.Is(err, relay.ErrStop) {
		closeLog()
		return fmt.Errorf("stream %q: %w", s.name, err)
	}
	if err != nil {
		closeLog()
		way := "start the upstream first (serve waits " + relay.GreetingWait.String() + " for it), or check the URL and its credentials"
		var cv *tls.CertificateVerificationError
		if errors.As(err, &cv) {
			way = "its certificate is not signed by a CA this host trusts: give the CA's certificate in the stream's upstream_ca_file:"
		}
		return fmt.Errorf("stream %q relays %s, whose greeting carries the schema the relay serves, and got none: %w; %s",
			s.name, clean, err, way)
	}
	if s.cfg.Durable && !g.Durable {
		closeLog()
		return fmt.Errorf("stream %q is a durable relay of %s, which is live-only: its rows have no offsets to keep; set durable: false on the relay", s.name, clean)
	}
	sch := schema.Any()
	if lg != nil {
		// The log's schema is what its rows are; a greeting with another
		// stops the follower, loudly, while the rows kept are still served.
		sch = lg.Schema()
	} else if len(g.Schema) > 0 && !bytes.Equal(g.Schema, []byte("null")) {
		if sch, err = schema.Compile(g.Schema); err != nil {
			return fmt.Errorf("stream %q: the schema of its upstream %s does not compile here: %w", s.name, clean, err)
		}
	}
	s.sch = sch
	s.schemaJSON = nil
	if !sch.IsAny() {
		s.schemaJSON = sch.JSON()
	}
	s.relay = r
	if !s.cfg.Durable {
		s.end = wire.Null
		s.endOffset.Store(wire.Null)
		return nil
	}
	if lg == nil {
		// A new relay starts where the upstream's replay reaches back to:
		// asking for offset 1 of a stream whose window has moved on
		// would only be refused (too_old). Its log starts there.
		start, err := r.Earliest(ctx)
		if err != nil {
			return fmt.Errorf("stream %q: find where the relay of %s starts: %w", s.name, clean, err)
		}
		sp := logSpec{Stream: s.cfg, Schema: s.sch, Server: s.storageConfig(), Clock: s.srv.opts.Clock}
		if lg, err = createCacheLog(sp, lay, start); err != nil {
			r.Stop()
			return err
		}
		s.srv.logger.Info("new relay: its log starts at the upstream's earliest replayable offset", "stream", s.name, "upstream", clean, "offset", start, "upstream_stream_id", g.StreamID)
	}
	if kept == "" {
		// A new log, or one kept before the relay recorded its upstream:
		// the stream it mirrors from now on is this one.
		if err := recordUpstream(home, s.name, g.StreamID); err != nil {
			r.Stop()
			_ = lg.Close()
			return fmt.Errorf("stream %q: %w", s.name, err)
		}
	}
	_, end, err := lg.Extent(ctx)
	if err != nil {
		r.Stop()
		_ = lg.Close()
		return fmt.Errorf("stream %q: read the extent of %s: %w", s.name, lg.Dir(), err)
	}
	s.log = lg
	s.end = end
	s.endOffset.Store(end)
	// The log is a cache: serve's seal, compact and clean children keep
	// it by the tiers' retention, and nothing publishes it (cacheLogs).
	return nil
}

// startRelay runs the relay's mirroring loop until drain stops it.
func (s *stream) startRelay() {
	s.life.committed = s.relay.Start(relayTarget{s})
}

// relayStats is what /stats reports of a relay stream.
func (s *stream) relayStats() *RelayStats {
	st := s.relay.Stats()
	return &RelayStats{
		Upstream:     st.Upstream,
		State:        st.State,
		Error:        st.Error,
		SinceTS:      unixSeconds(st.Since),
		Reconnects:   st.Reconnects,
		RowsMirrored: st.Received,
	}
}

// relayTarget is a relay stream as its follower feeds it.
type relayTarget struct{ s *stream }

func (t relayTarget) Durable() bool      { return t.s.log != nil }
func (t relayTarget) SchemaJSON() []byte { return t.s.schemaJSON }

func (t relayTarget) End() int64 {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return t.s.end
}

func (t relayTarget) Deliver(frames, rows [][]byte, first, next int64) {
	t.s.deliver(frames, rows, first, next)
}

// Commit appends a relayed group to the log. It is not cancelled with the
// follower's session: a commit under way finishes, and is fanned out, so
// what the log holds is what subscribers were offered.
func (t relayTarget) Commit(first int64, rows [][]byte, ts []int64) error {
	s := t.s
	if err := s.log.AppendAt(context.Background(), first, rows, ts); err != nil {
		if errors.Is(err, logstore.ErrNotContiguous) {
			return fmt.Errorf("%w: %v", relay.ErrStop, err)
		}
		s.srv.commitErrs.Error(context.Background(), s.name, "relay commit failed; retrying from the log's end", "stream", s.name, "rows", len(rows), "err", err)
		return err
	}
	s.srv.commitErrs.Recovered(context.Background(), s.name, "relay commits succeed again", "stream", s.name)
	if m := s.m; m != nil {
		m.RowsCommitted.Add(int64(len(rows)))
		m.CommitGroups.Add(1)
	}
	return nil
}

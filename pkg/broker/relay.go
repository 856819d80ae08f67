package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/streamcast/streamcast/pkg/broker/relay"
	"github.com/streamcast/streamcast/pkg/broker/stats"
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
// with that schema (durable relays) as open does for any stream.
func (s *stream) openRelay(ctx context.Context, root string) error {
	clean, cred, err := s.cfg.UpstreamURL()
	if err != nil {
		return fmt.Errorf("stream %q: upstream: %w", s.name, err)
	}
	if cred == nil {
		cred = s.srv.opts.UpstreamCredentials
	}
	r := relay.New(relay.Config{
		URL:         clean,
		Credentials: cred,
		MaxGroup:    maxGroupRows,
		Logger:      s.srv.logger.With("stream", s.name, "upstream", clean),
	})
	g, err := r.Open(ctx)
	if err != nil {
		return fmt.Errorf("stream %q relays %s, whose greeting carries the schema the relay serves, and got none: %w; "+
			"start the upstream first (serve waits %s for it), or check the URL and its credentials",
			s.name, clean, err, relay.GreetingWait)
	}
	if s.cfg.Durable && !g.Durable {
		return fmt.Errorf("stream %q is a durable relay of %s, which is live-only: its rows have no offsets to keep; set durable: false on the relay", s.name, clean)
	}
	sch := schema.Any()
	if len(g.Schema) > 0 && !bytes.Equal(g.Schema, []byte("null")) {
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
	if err := s.openLog(ctx, root); err != nil {
		return err
	}
	// The log is a cache: serve's seal, compact and clean children keep
	// it by the tiers' retention, and nothing publishes it (cacheLogs).
	return nil
}

// startRelay runs the relay's mirroring loop until drain stops it.
func (s *stream) startRelay() {
	s.life.committed = s.relay.Start(relayTarget{s})
}

// relayStats is what /stats reports of a relay stream.
func (s *stream) relayStats() *stats.RelayStats {
	st := s.relay.Stats()
	return &stats.RelayStats{
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

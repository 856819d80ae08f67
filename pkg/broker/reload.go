package broker

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/streamcast/streamcast/pkg/broker/config"
	"github.com/streamcast/streamcast/pkg/broker/supervise"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// Reload applies cfg's streams to the running server while the others
// keep serving: a stream cfg declares and the server does not serve starts,
// a stream the server serves and cfg no longer declares stops (see
// stopStream for the order), each logged. A stream whose declaration
// changed keeps serving as it was, and the log says why and what to do.
// metrics.public applies at once. Every other section (listen, root,
// limits, maintain, published, s3, tiers, allowed_origins,
// metrics.enabled) applies only at the next start; a change to one is
// logged as such. A cfg that does not validate changes nothing. The
// maintenance children are restarted over the new set of logs when it
// changed. The error joins what could not be applied (a stream that
// failed to open, children that did not restart); the rest was applied.
func (s *Server) Reload(cfg config.Config) error {
	schemas, err := cfg.Compile()
	if err != nil {
		return fmt.Errorf("reload: the new config is refused, so nothing changed: %w", err)
	}
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.state.Load() != stateReady {
		return errors.New("reload: the server is starting or stopping, so nothing changed; reload once it serves")
	}
	ctx := s.runCtx
	s.logRestartOnly(cfg)
	if m := s.metrics; m != nil && m.public.Swap(cfg.Metrics.Public) != cfg.Metrics.Public {
		s.logger.Info("metrics.public changed", "public", cfg.Metrics.Public)
	}

	declared := make(map[string]int, len(cfg.Streams))
	names := make([]string, len(cfg.Streams))
	for i, sc := range cfg.Streams {
		declared[sc.Name] = i
		names[i] = sc.Name
	}
	type stopping struct {
		st    *stream
		conns []*wsConn
	}
	var stops []stopping
	for _, st := range s.reg.list() {
		i, ok := declared[st.name]
		if !ok {
			// 1. Out of the registry (new connections get 4404), then
			// fence and drain, so its log's end stops moving.
			s.reg.remove(st.name)
			conns := st.beginStop(wire.WhyStreamStopped)
			st.fence(conns)
			st.drain()
			stops = append(stops, stopping{st, conns})
			continue
		}
		if why := declarationChange(st, cfg.Streams[i], schemas[i]); why != "" {
			s.logger.Warn("stream keeps serving as it was: "+why, "stream", st.name)
		}
	}

	// 2. Start the streams added.
	var errs []error
	for i, sc := range cfg.Streams {
		if s.reg.get(sc.Name) != nil {
			continue
		}
		st := newStream(s, sc, schemas[i], s.cfg.Limits)
		if err := st.open(ctx, s.cfg.Root); err != nil {
			s.logger.Error("stream not added", "stream", sc.Name, "err", err)
			errs = append(errs, err)
			continue
		}
		st.start()
		s.reg.add(st)
		s.logger.Info("stream added", "stream", sc.Name, "durable", sc.Durable)
	}
	s.reg.reorder(names)

	// 3. The children learn the new set of logs; no stream's writes wait.
	if err := s.restartMaintenance(ctx); err != nil {
		s.logger.Error("the maintenance children did not restart over the new set of logs; rows stay safe in each log's buffer, "+
			"and a restart of serve starts them again", "err", err)
		errs = append(errs, fmt.Errorf("restart the maintenance children: %w", err))
	}

	// 4. Finish the streams removed: flush, 1001, release the lock.
	for _, x := range stops {
		if err := s.finishStop(x.st, x.conns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// finishStop ends a stream that left the registry, was fenced and drained,
// and whose log no maintenance child serves any more: seal and publish
// flush its log (every acknowledged row published, unless flush_every is
// 0), its subscribers get 1001, and its log is closed, which releases its
// lock (I7) for the next process that opens it.
func (s *Server) finishStop(st *stream, conns []*wsConn) error {
	var err error
	if st.log != nil {
		switch {
		case s.cfg.Maintain.FlushEvery <= 0:
			s.logger.Warn("maintain.flush_every is 0, so the stopped stream's log is not flushed: its unsealed rows stay in its buffer, safe",
				"stream", st.name, "log", st.log.Dir())
		default:
			lag, ferr := supervise.FlushLog(st.log, supervise.DefaultStopWaits)
			switch {
			case ferr != nil:
				err = fmt.Errorf("stream %q: flush its log at %s: %w", st.name, st.log.Dir(), ferr)
				s.logger.Error("the stopped stream's log could not be flushed; its rows are safe in the log and publish once it is maintained again",
					"stream", st.name, "log", st.log.Dir(), "err", ferr)
			case lag > 0:
				s.logger.Error("acknowledged rows of the stopped stream are not published yet; they are safe in the log and publish once it is maintained again",
					"stream", st.name, "log", st.log.Dir(), "unpublished_rows", lag)
			}
		}
	}
	st.closeSubscribers(conns)
	if !st.waitConns(conns, 2*closeGrace) {
		s.logger.Warn("connections of the stopped stream still open after the grace period; dropped them", "stream", st.name)
	}
	st.life.tiers.Store(nil)
	end := st.endOffset.Load()
	if cerr := st.closeLog(); cerr != nil {
		s.logger.Error("close log", "stream", st.name, "err", cerr)
		err = errors.Join(err, cerr)
	}
	if st.cfg.Durable {
		s.logger.Info("stream removed", "stream", st.name, "end_offset", end)
	} else {
		s.logger.Info("stream removed", "stream", st.name)
	}
	return err
}

// declarationChange says how sc differs from the declaration st serves,
// and what to do about it; "" when it does not.
func declarationChange(st *stream, sc config.Stream, sch *schema.Schema) string {
	old := st.cfg
	schemaChanged := st.sch.IsAny() != sch.IsAny() || string(st.sch.JSON()) != string(sch.JSON())
	if schemaChanged && old.Durable && sc.Durable {
		return "its schema changed, and a durable stream's log keeps the schema it was created with, so the change cannot be applied in place; " +
			"to serve rows of the new schema, stop the server and run streamcast migrate " + st.name + " (the stream continues in a new log from its end), " +
			"or put the old schema back in the config"
	}
	var keys []string
	if schemaChanged {
		keys = append(keys, "schema")
	}
	if old.Durable != sc.Durable {
		keys = append(keys, "durable")
	}
	if old.GroupCommit != sc.GroupCommit {
		keys = append(keys, "group_commit")
	}
	if !reflect.DeepEqual(old.MaxReplay, sc.MaxReplay) {
		keys = append(keys, "max_replay")
	}
	if old.ExactlyOnce != sc.ExactlyOnce {
		keys = append(keys, "exactly_once")
	}
	if !slices.Equal(old.SortBy, sc.SortBy) {
		keys = append(keys, "sort_by")
	}
	// A guard added to a running stream is checked when serve restarts:
	// its traffic was admitted already.
	if !reflect.DeepEqual(old.HistoryGuard, sc.HistoryGuard) {
		keys = append(keys, "history_guard")
	}
	if len(keys) == 0 {
		return ""
	}
	return "its declaration changed (" + strings.Join(keys, ", ") + "), which a running stream does not take; " +
		"it applies when serve restarts, or remove the stream from the config, reload, and add it back " +
		"(its clients are closed with 1001 and reconnect)"
}

// logRestartOnly logs each section of cfg that differs from the running
// config and applies only when serve starts.
func (s *Server) logRestartOnly(cfg config.Config) {
	old := s.cfg
	for _, k := range []struct {
		key      string
		was, now any
	}{
		{"listen", old.Listen, cfg.Listen},
		{"root", old.Root, cfg.Root},
		{"limits", old.Limits, cfg.Limits},
		{"maintain", old.Maintain, cfg.Maintain},
		{"published", old.Published, cfg.Published},
		{"s3", old.S3, cfg.S3},
		{"tiers", old.Tiers, cfg.Tiers},
		{"allowed_origins", strings.Join(old.AllowedOrigins, " "), strings.Join(cfg.AllowedOrigins, " ")}, // nil and [] alike
		{"metrics.enabled", old.Metrics.Enabled, cfg.Metrics.Enabled},
	} {
		if !reflect.DeepEqual(k.was, k.now) {
			s.logger.Warn(k.key+" changed in the config; it applies when serve restarts, and until then serve keeps the value it started with", "key", k.key)
		}
	}
}

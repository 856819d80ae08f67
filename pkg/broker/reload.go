package broker

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/streamcast/streamcast/pkg/broker/supervise"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// Reload applies cfg's streams to the running server while the others
// keep serving: a stream cfg declares and the server does not serve starts,
// a stream the server serves and cfg no longer declares stops (see
// stopStream for the order), each logged. A stream whose declaration
// changed keeps serving as it was, and the log says why and what to do.
// The auth: section is replaced: new connections are checked against the
// new users and grants, while connections already open keep the access
// they were admitted with. metrics.public applies at once. The tls:
// section's files are read again for new handshakes (open connections keep
// theirs); turning TLS or mutual TLS on or off applies only at the next
// start, as does every other section (listen, root, limits, maintain,
// published, s3, tiers, allowed_origins, metrics.enabled); a change to one
// is logged as such. A cfg that does not validate changes nothing. A
// stream added whose name is a served registered stream's (the control
// API's), or differs from one only in case, is not added. When the set of
// logs changed, the maintenance children running are handed the added
// streams' logs, or restarted over the new set when a stream stopped
// (supervise.Runner.Ensure). The error joins what could not be applied (a
// stream refused or that failed to open, children that did not restart);
// the rest was applied.
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
	var errs []error
	if s.certs != nil && cfg.TLS.Enabled() {
		// New handshakes get the pair read now; open connections keep
		// the keys they agreed on.
		if err := s.certs.Reload(cfg.TLS, "reload"); err != nil {
			errs = append(errs, fmt.Errorf("reload the TLS certificate: %w", err))
		}
	}
	s.reloadAuth(cfg.Auth)
	if m := s.metrics; m != nil && m.public.Swap(cfg.Metrics.Public) != cfg.Metrics.Public {
		s.logger.Info("metrics.public changed", "public", cfg.Metrics.Public)
	}
	if s.accessLog.Swap(cfg.Log.Access) != cfg.Log.Access {
		s.logger.Info("log.access changed", "access", cfg.Log.Access)
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
	for _, st := range s.reg.List() {
		if st.storage != nil {
			continue // registered: the control API's to start and stop
		}
		i, ok := declared[st.name]
		if !ok {
			// 1. Out of the registry (new connections get 4404), then
			// fence and drain, so its log's end stops moving.
			s.reg.Remove(st.name)
			conns := st.beginStop(wire.WhyStreamStopped)
			st.fence(conns)
			st.drain()
			stops = append(stops, stopping{st, conns})
			continue
		}
		if why := st.cfg.Change(st.sch, cfg.Streams[i], schemas[i]); why != "" {
			s.logger.Warn("stream keeps serving as it was: "+why, "stream", st.name)
		}
	}

	// 2. Start the streams added. The config loader refuses two names
	// that differ only in case, and the control API refuses a registered
	// one beside a static one; a static stream added here must not slip
	// past both.
	registered := map[string]string{} // by meta.Fold
	for _, st := range s.reg.List() {
		if st.storage != nil {
			registered[meta.Fold(st.name)] = st.name
		}
	}
	for i, sc := range cfg.Streams {
		if st := s.reg.Get(sc.Name); st != nil {
			if st.storage != nil {
				s.logger.Error("stream not added: the control registry holds a stream of that name; a name can be only one", "stream", sc.Name)
			}
			continue
		}
		if other, ok := registered[meta.Fold(sc.Name)]; ok {
			err := fmt.Errorf("stream %q not added: it differs only in case from %q, a stream the control API registered and serves; "+
				"on a case-insensitive file system they would share a directory, so give the config's stream a name that differs in more than case, "+
				"or remove %q through the control API first", sc.Name, other, other)
			s.logger.Error("stream not added: its name differs only in case from a registered stream's", "stream", sc.Name, "registered", other, "err", err)
			errs = append(errs, err)
			continue
		}
		st := newStream(s, sc, schemas[i], sc.Limits.Over(s.cfg.Limits))
		if err := st.open(ctx, s.cfg.Root); err != nil {
			s.logger.Error("stream not added", "stream", sc.Name, "err", err)
			errs = append(errs, err)
			continue
		}
		st.start()
		s.reg.Add(st.name, st)
		s.logger.Info("stream added", "stream", sc.Name, "durable", sc.Durable)
	}
	s.reg.Reorder(names)

	// 3. The children learn the new set of logs (those running take added
	// logs as they run); no stream's writes wait.
	if err := s.restartMaintenance(ctx); err != nil {
		s.logger.Error("the maintenance children did not take the new set of logs; rows stay safe in each log's buffer, "+
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

// reloadAuth puts the auth: section a reload read in force for new
// connections, and logs what changed (counts, never a hash).
func (s *Server) reloadAuth(a *config.Auth) {
	was := s.cfg.Auth
	if reflect.DeepEqual(was, a) {
		return
	}
	s.gate.Set(a)
	s.cfg.Auth = a
	switch {
	case a == nil:
		s.logger.Warn("auth: was removed from the config: new connections are no longer authenticated, and everyone may read, publish and read /stats; connections already open keep what they were admitted to")
		if addr := s.Addr(); addr != nil {
			s.gate.WarnOpen(addr)
		}
	default:
		s.logger.Info("auth: reloaded; new connections are checked against it, connections already open keep what they were admitted to",
			"users", len(a.Users), "grants", len(a.Grants))
	}
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
		case st.relay != nil:
			// A relay's log is a cache of its upstream's: it is never
			// published, and its rows are safe in its buffer.
		case s.cfg.Maintain.FlushEvery <= 0:
			s.logger.Warn("maintain.flush_every is 0, so the stopped stream's log is not flushed: its unsealed rows stay in its buffer, safe",
				"stream", st.name, "log", st.log.Dir())
		default:
			lag, ferr := supervise.FlushLog(st.log, supervise.DefaultStopWaits())
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

// logRestartOnly logs each section of cfg that differs from the running
// config and applies only when serve starts.
func (s *Server) logRestartOnly(cfg config.Config) {
	for _, key := range s.cfg.RestartOnly(cfg) {
		s.logger.Warn(key+" changed in the config; it applies when serve restarts, and until then serve keeps the value it started with", "key", key)
	}
}

package broker

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/ratelog"
	"github.com/streamcast/streamcast/internal/waitfor"
	"github.com/streamcast/streamcast/pkg/broker/control"
	"github.com/streamcast/streamcast/pkg/broker/supervise"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// Options are the server's dependencies and knobs that are not configuration
// an operator writes.
type Options struct {
	// Logger receives the server's log; nil discards it.
	Logger *log.Logger
	// DropGrace bounds how long a subscriber dropped for falling behind
	// (4429) has to take its contiguous prefix and the close frame before
	// its connection is cut; 0 means DefaultDropGrace.
	DropGrace time.Duration
	// PingInterval is how often every connection is pinged; a peer that
	// sends nothing (not even a pong) and takes none of the bytes queued for
	// it for two intervals is dropped. 0 means 20 s.
	PingInterval time.Duration
	// OnReady, when set, is called once every stream is open, every
	// maintenance child is ready and the server accepts connections, with
	// the address it listens on.
	OnReady func(addr net.Addr)
	// Executable is the streamcast binary the maintenance children run
	// (`Executable maintain --role R …`). It is required when the config's
	// maintain section runs any role over a durable stream; `streamcast
	// serve` passes its own executable.
	Executable string
	// ConfigFile, when set, is passed to the children as --config, so they
	// read the file serve read rather than whatever their defaults find.
	ConfigFile string
	// ChildReadyTimeout bounds how long Run waits for every maintenance
	// child to report ready before it fails; 0 means 30 s.
	ChildReadyTimeout time.Duration
	// Clock stamps committed rows and is every log's clock (its graces and
	// retentions); nil is the system clock. The children, other processes,
	// keep the system's.
	Clock logstore.Clock
	// UpstreamCredentials, when set, are sent (HTTP Basic) to the upstream
	// of every relay stream whose upstream: URL carries none; `streamcast
	// serve` takes them from STREAMCAST_USER and STREAMCAST_PASSWORD, as
	// the clients do.
	UpstreamCredentials *url.Userinfo

	// appendHook, when set (tests only), commits each group of a durable
	// stream in place of the log's Append: it gets the log, and calls
	// Append itself for the group to commit.
	appendHook func(ctx context.Context, l *logstore.Log, rows [][]byte, ts int64, marks []logstore.Mark) (int64, error)
	// writeHook, when set (tests only), is called by a connection's writer
	// before it writes n queued data frames, which are then still counted
	// in the queue: a hook that blocks holds them "in write". claimed says
	// the write is a claimed one (conn.go, writeClaimed), made by the
	// goroutine that delivers the group, which waits for it.
	writeHook func(c *wsConn, n int, claimed bool)
	// deflatePerConn, when set (tests and benchmarks only), gives every
	// compressing subscriber a compressor of its own in place of the
	// shared groups, to measure the two against each other.
	deflatePerConn bool
	// beforeReady, when set (tests only), runs as the start ends, before
	// the server becomes ready: a hook that blocks holds it starting.
	beforeReady func()
	// awaitingStart, when set (tests only), is called by an HTTP publish or
	// an event stream that arrives while the server starts, as it begins
	// to wait (awaitStart).
	awaitingStart func()
	// keepaliveTicks, when set (tests only), drives keepalive in place of
	// a PingInterval ticker: each value received is one tick.
	keepaliveTicks <-chan time.Time

	// Middleware wraps every request after the server's own Origin check
	// and authentication, and before the routes, in order (the first is outermost).
	Middleware []Middleware

	// TuneGC lets the server narrow the garbage collector's headroom
	// (runtime/debug.SetGCPercent) while where= filters hold much memory
	// (see gcHeadroom). The setting is process-wide, so only a process
	// that runs one server turns it on, as `streamcast serve` does.
	TuneGC bool

	// CertPollInterval is how often the tls: section's files are checked
	// for a change on disk (a changed pair is loaded for new handshakes);
	// 0 means DefaultCertPollInterval.
	CertPollInterval time.Duration
}

// errorSummaryEvery is how often a failure that keeps repeating (a commit
// on a full disk) is logged again, with the count since its last line.
const errorSummaryEvery = 10 * time.Second

// Server states, for /health.
const (
	stateStarting int32 = iota
	stateReady
	stateStopping
)

// Server serves the configured streams over WebSocket, plus /stats and
// /health. Build it with New, run it with Run; Close (or cancelling Run's
// context) shuts it down cleanly: every goroutine it started has ended when
// Run returns. Reload adds and stops streams while it runs.
type Server struct {
	cfg    config.Config // as given to New; Reload changes only the streams served
	opts   Options
	logger *log.Logger
	reg    *streamRegistry[*stream]
	chain  http.Handler // middleware, then routes (entry.go)

	// commitErrs logs failed commits once per stream and interval, with a
	// count: a full disk fails every commit group, thousands a second.
	commitErrs *ratelog.Limiter

	started     time.Time // monotonic base for ages and uptime
	startedWall time.Time

	state atomic.Int32
	ready chan struct{}
	addr  atomic.Pointer[net.Addr]

	// children runs the maintenance children (supervise.Group), none when
	// no role runs; Reload and the control API replace its Group.
	children supervise.Runner

	// lifeMu serialises what changes the set of streams (Run's start and
	// teardown, Reload), so a reload never races a shutdown.
	lifeMu sync.Mutex
	runCtx context.Context // Run's context, for opening streams Reload adds

	runMu  sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}

	subUp websocket.Upgrader // small read buffer: subscribers send nothing
	pubUp websocket.Upgrader // larger read buffer: publishers stream frames in

	// mu guards conns and stopping. Registration checks stopping under it,
	// so shutdown misses no connection.
	mu        sync.Mutex
	conns     map[*wsConn]struct{}
	stopping  bool
	handlers  sync.WaitGroup // WebSocket handlers (each owns its connection's goroutines)
	keepalive sync.WaitGroup // the keepalive and reclaimer goroutines

	// gate authenticates and authorises every request at the entry;
	// Reload swaps its policy.
	gate *authGate
	// entry is the listener once Run opened it, for /metrics's counts.
	entry atomic.Pointer[connListener]
	// held counts, by stream name, the control API's changes between a
	// stop and a start (ctlRuntime.Hold): arrivals are told to retry.
	heldMu sync.Mutex
	held   map[string]int
	// id names this server process in wire.RelayChainHeader, so that a
	// relay can tell its own stream come back round a loop of relays.
	id string

	// reclaim gives memory back to the OS after connections holding large
	// queues end (reclaim.go).
	reclaim *reclaimer

	// deflaters bounds the permessage-deflate compressors held at once
	// (limits.max_compression_bytes; deflate.go).
	deflaters *deflateBudget

	// filters holds the subscribers' compiled where= filters, shared and
	// bounded by limits.max_filter_bytes (filtercache.go).
	filters *filterCache

	// certs is the TLS certificate new handshakes get (certs.go); nil when
	// the server speaks plain http and ws.
	certs *certStore

	// accessLog is log.access: log a line per connection as it closes.
	// Reload changes it.
	accessLog atomic.Bool

	// metrics serves /metrics; nil when metrics.enabled is false, and then
	// nothing on the hot path reads a clock for it.
	metrics *serverMetrics

	// control serves /control/v1 and runs its operations (controlruntime.go);
	// nil without a control: section, and until Run booted it. ctlReg is
	// its registry, closed when Run ends.
	control atomic.Pointer[control.Controller]
	ctlReg  *control.Registry
}

// writeBufferPool gives gorilla a pool so it keeps no write buffer per
// connection: the server writes frames itself and gorilla only writes the
// handshake.
type writeBufferPool struct{ p sync.Pool }

func (w *writeBufferPool) Get() any  { return w.p.Get() }
func (w *writeBufferPool) Put(v any) { w.p.Put(v) }

// New validates cfg and builds a server; nothing is opened until Run.
func New(cfg config.Config, opts Options) (*Server, error) {
	schemas, err := cfg.Compile()
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = log.New(io.Discard)
	}
	if opts.DropGrace <= 0 {
		opts.DropGrace = DefaultDropGrace
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = 20 * time.Second
	}
	if opts.ChildReadyTimeout <= 0 {
		opts.ChildReadyTimeout = supervise.DefaultReadyTimeout
	}
	if opts.CertPollInterval <= 0 {
		opts.CertPollInterval = DefaultCertPollInterval
	}
	if roles := cfg.Maintain.Roles(); len(roles) > 0 && opts.Executable == "" && slices.ContainsFunc(cfg.Streams, func(s config.Stream) bool { return s.Durable }) {
		return nil, supervise.NoExecutable(len(roles))
	}
	s := &Server{
		cfg:         cfg,
		opts:        opts,
		logger:      opts.Logger,
		reg:         newStreamRegistry[*stream](),
		started:     time.Now(),
		startedWall: time.Now(),
		ready:       make(chan struct{}),
		conns:       map[*wsConn]struct{}{},
		reclaim:     newReclaimer(opts.Logger),
		held:        map[string]int{},
		id:          rand.Text()[:16],
	}
	s.accessLog.Store(cfg.Log.Access)
	s.filters = newFilterCache(int64(cfg.Limits.MaxFilterBytes), opts.Logger)
	s.deflaters = newDeflateBudget(cfg.Limits.MaxCompressionBytes)
	if opts.TuneGC {
		s.filters.headroom = newGCHeadroom()
	}
	s.gate = newAuthGate(cfg.Auth, opts.Clock.Now, opts.Logger, s.RecordAuthFailure)
	if cfg.Metrics.Enabled {
		s.metrics = newServerMetrics(s)
	}
	s.commitErrs = ratelog.New(slog.New(opts.Logger), errorSummaryEvery, opts.Clock.Now)
	if cfg.TLS.Enabled() {
		if s.certs, err = newCertStore(cfg.TLS, opts.Logger); err != nil {
			return nil, err
		}
	}
	s.chain = s.handler()
	pool := &writeBufferPool{}
	// Origins are checked by the middleware (allowed_origins), before the
	// upgrade, with a message that says why.
	anyOrigin := func(*http.Request) bool { return true }
	s.subUp = websocket.Upgrader{ReadBufferSize: 512, WriteBufferPool: pool, CheckOrigin: anyOrigin, HandshakeTimeout: 10 * time.Second}
	s.pubUp = websocket.Upgrader{ReadBufferSize: 64 << 10, WriteBufferPool: pool, CheckOrigin: anyOrigin, HandshakeTimeout: 10 * time.Second}
	for i, sc := range cfg.Streams {
		s.reg.Add(sc.Name, newStream(s, sc, schemas[i], sc.Limits.Over(cfg.Limits)))
	}
	return s, nil
}

// Ready is closed once every stream is open and connections are served.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr is the address the server listens on, or nil before Run listens.
func (s *Server) Addr() net.Addr {
	if a := s.addr.Load(); a != nil {
		return *a
	}
	return nil
}

// Run listens on cfg.Listen, opens every stream's log, serves until ctx is
// cancelled or Close is called, then shuts down: stop accepting, stop reading
// publishers, commit and acknowledge what they sent, close every connection
// with 1001, close the logs. It returns nil after a clean shutdown.
func (s *Server) Run(ctx context.Context) error {
	s.runMu.Lock()
	if s.done != nil {
		s.runMu.Unlock()
		return errors.New("broker: Run called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.done = make(chan struct{})
	s.runMu.Unlock()
	defer close(s.done)
	defer cancel()

	ent, err := s.listen()
	if err != nil {
		return err
	}
	addr := ent.Addr()
	s.addr.Store(&addr)

	// Listening already (so /health answers 503 while starting); open the
	// logs and start the children, then serve until told to stop.
	stopKeepalive := make(chan struct{})
	runErr := s.bootControl(ctx)
	if runErr == nil {
		runErr = s.start(ctx)
	}
	if runErr == nil {
		s.keepalive.Add(2)
		go func() {
			defer s.keepalive.Done()
			s.keepaliveLoop(stopKeepalive)
		}()
		go func() {
			defer s.keepalive.Done()
			s.reclaim.Run(stopKeepalive)
		}()
		s.keepalive.Add(1)
		go func() {
			defer s.keepalive.Done()
			s.filters.reclaim.Run(stopKeepalive)
		}()
		if s.certs != nil {
			s.keepalive.Add(1)
			go func() {
				defer s.keepalive.Done()
				s.certs.Watch(stopKeepalive, s.opts.CertPollInterval)
			}()
		}
		if s.opts.beforeReady != nil {
			s.opts.beforeReady()
		}
		s.state.Store(stateReady)
		if ctl := s.control.Load(); ctl != nil {
			ctl.Start()
		}
		close(s.ready)
		if s.certs != nil {
			s.logger.Info("listening on "+addr.String(), "streams", len(s.reg.List()), "root", s.cfg.Root, "tls", s.cfg.TLS.Mode())
		} else {
			s.logger.Info("listening on "+addr.String(), "streams", len(s.reg.List()), "root", s.cfg.Root)
		}
		s.gate.WarnOpen(addr)
		if s.opts.OnReady != nil {
			s.opts.OnReady(addr)
		}
		select {
		case <-ctx.Done():
		case <-ent.Failed():
			if err := ent.Err(); !errors.Is(err, http.ErrServerClosed) {
				runErr = fmt.Errorf("serve %s: %w", addr, err)
			}
		}
	} else if errors.Is(runErr, context.Canceled) && ctx.Err() != nil {
		s.logger.Info("stopped while starting")
		runErr = nil
	}
	s.closeControl()
	if err := s.teardown(ent); runErr == nil {
		runErr = err
	}
	if s.ctlReg != nil {
		if err := s.ctlReg.Close(); err != nil {
			s.logger.Error("close the control registry", "err", err)
		}
	}
	close(stopKeepalive)
	s.keepalive.Wait()
	s.logger.Info("stopped")
	return runErr
}

// start opens every stream's log, starts the maintenance children over
// them, then the committers. On failure, teardown closes what it opened.
func (s *Server) start(ctx context.Context) error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	s.runCtx = ctx
	for _, st := range s.reg.List() {
		err := st.open(ctx, st.storageConfig().Root)
		if st.storage != nil {
			// A registered stream that cannot open is the controller's to
			// report; the server and its other streams serve on.
			if err != nil {
				s.reg.Remove(st.name)
			}
			s.startedRegistered(ctx, st, err)
			continue
		}
		if err != nil {
			return err
		}
	}
	streams := s.reg.List()
	if err := s.restartMaintenance(ctx); err != nil {
		return err
	}
	for _, st := range streams {
		st.start()
	}
	return nil
}

// teardown stops the server in the order that loses no acknowledged row;
// it is the one way Run ends, after a failed start as after serving. Each
// step runs over every stream before the next begins, so no stream waits
// on another's flush.
func (s *Server) teardown(ent *connListener) error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	s.state.Store(stateStopping)
	s.logger.Info("shutting down")
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()

	// 1. Stop accepting. Plain requests in flight (an event stream among
	// them) go on: they are waited for once the subscribers are closed.
	ent.Stop()

	streams := s.reg.List()
	conns := make([][]*wsConn, len(streams))
	for i, st := range streams {
		conns[i] = st.beginStop(wire.WhyServerStopping)
	}
	// 2. Stop reading publishers; what they sent so far is accepted.
	for i, st := range streams {
		st.fence(conns[i])
	}
	// 3. Commit what was accepted, fan it out and acknowledge it; each
	// publisher closes with 1001 once its replies are written.
	for _, st := range streams {
		st.inbox.Close()
	}
	for _, st := range streams {
		st.drain()
	}
	// 4. 1001 to every subscriber, after the frames queued for it.
	for i, st := range streams {
		st.closeSubscribers(conns[i])
	}
	if !waitfor.Group(&s.handlers, 2*closeGrace) {
		s.logger.Warn("connections still open after the grace period; dropping them")
		s.mu.Lock()
		for c := range s.conns {
			c.abort()
		}
		s.mu.Unlock()
		s.handlers.Wait()
	}
	_ = ent.Close(closeGrace)

	// 5. Writes are fenced and the committers drained: flush and stop the
	// maintenance children (see supervise.Group.Stop for the order).
	var writers []*logstore.Log
	for _, st := range streams {
		st.life.tiers.Store(nil)
		if st.log != nil && st.relay == nil {
			// A relay's log is a cache: its rows are safe in its buffer,
			// and the stop must not seal or publish it.
			writers = append(writers, st.log)
		}
	}
	if sup := s.children.Replace(nil); sup != nil {
		sup.Stop(writers)
	}
	// 6. Release the logs' locks.
	var err error
	for _, st := range streams {
		if cerr := st.closeLog(); cerr != nil {
			s.logger.Error("close log", "stream", st.name, "err", cerr)
			err = cmp.Or(err, cerr)
		}
	}
	return err
}

// maintainedLogs returns the absolute directories of the open logs of the
// streams served, in registry order, by what the maintenance children do
// with them: a retired stream's log is fenced and wholly published (retire
// did both), so only retain runs over it; a relay's log is a cache of its
// upstream's, which must never publish (docs/design.md §4.1).
func (s *Server) maintainedLogs() (supervise.Logs, error) {
	var out supervise.Logs
	for _, st := range s.reg.List() {
		if st.log == nil {
			continue
		}
		dir, err := filepath.Abs(st.log.Dir())
		if err != nil {
			return supervise.Logs{}, fmt.Errorf("stream %q: %w", st.name, err)
		}
		switch {
		case st.relay != nil:
			out.Cache = append(out.Cache, dir)
		case st.retirement() != nil:
			out.Retired = append(out.Retired, dir)
		case st.cfg.Replicate:
			out.Live = append(out.Live, dir)
			out.Replicated = append(out.Replicated, dir)
		default:
			out.Live = append(out.Live, dir)
		}
	}
	return out, nil
}

// restartMaintenance makes the maintenance children run over the logs of
// the streams served now (supervise.Runner.Ensure). Serve's own writes go
// on meanwhile: a child only seals, publishes and cleans what is
// committed, so no stream's writes are fenced. lifeMu is held.
func (s *Server) restartMaintenance(ctx context.Context) error {
	logs, err := s.maintainedLogs()
	if err != nil {
		return err
	}
	// What the logs may need of the descriptors changes with them.
	s.reserveForLogs(len(logs.Live) + len(logs.Retired) + len(logs.Cache))
	m := s.cfg.Maintain
	rep, err := s.cfg.ReplicaArgs() // the destination, resolved against serve's working directory
	if err != nil {
		return err
	}
	sp := supervise.Spec{
		Executable:   s.opts.Executable,
		ConfigFile:   s.opts.ConfigFile,
		FlushEvery:   m.FlushEvery,
		ReadyTimeout: s.opts.ChildReadyTimeout,
		Replicate:    rep,
		Overrides:    s.cfg.Tiers.MaintainOverrides(),
		MaxOpenLogs:  m.MaxOpenLogs,
		Logger:       s.logger,
	}
	for _, r := range m.Roles() {
		sp.Roles = append(sp.Roles, supervise.Schedule(r))
	}
	if s.state.Load() == stateStarting && len(logs.Live) > 0 && !m.Runs(logstore.RoleSeal) {
		s.logger.Warn("serve runs no seal role (maintain: false, --no-maintain or maintain.seal_every: 0): rows stay in each log's buffer unless you run `streamcast maintain --role seal` yourself")
	}
	return s.children.Ensure(ctx, logs, sp)
}

// Close shuts the server down as cancelling Run's context does, and waits
// for Run to return.
func (s *Server) Close() error {
	s.runMu.Lock()
	cancel, done := s.cancel, s.done
	s.runMu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	return nil
}

// track registers a WebSocket handler; false while stopping.
func (s *Server) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	s.handlers.Add(1)
	return true
}

func (s *Server) untrack() { s.handlers.Done() }

// register adds c to the connections shutdown closes; false while stopping.
func (s *Server) register(c *wsConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) unregister(c *wsConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// keepaliveLoop pings every connection each interval and drops a peer that
// sent nothing, not even a pong, since the previous ping.
func (s *Server) keepaliveLoop(stop <-chan struct{}) {
	ticks := s.opts.keepaliveTicks
	if ticks == nil {
		t := time.NewTicker(s.opts.PingInterval)
		defer t.Stop()
		ticks = t.C
	}
	ping := wire.ControlFrame(wire.OpPing, nil)
	var conns []*wsConn
	for {
		select {
		case <-stop:
			return
		case <-ticks:
		}
		conns = conns[:0]
		s.mu.Lock()
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		for _, c := range conns {
			r, w := c.reads.Load(), c.written.Load()
			if c.pinged && r == c.seenReads && w == c.seenWritten && !c.holding.Load() {
				s.logger.Debug("dropping a silent peer", "remote", c.nc.RemoteAddr().String())
				c.abort()
				continue
			}
			c.seenReads, c.seenWritten = r, w
			c.pinged = true
			c.enqueueCtrl(ping)
		}
		clear(conns)
	}
}

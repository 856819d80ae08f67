package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/logstore"
)

// Options are the server's dependencies and knobs that are not configuration
// an operator writes.
type Options struct {
	// Logger receives the server's log; nil discards it.
	Logger *log.Logger
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

	// appendHook, when set (tests only), commits each group of a durable
	// stream in place of the log's Append: it gets the log, and calls
	// Append itself for the group to commit.
	appendHook func(ctx context.Context, l *logstore.Log, rows [][]byte, ts int64, marks []logstore.Mark) (int64, error)
}

// Server states, for /health.
const (
	stateStarting int32 = iota
	stateReady
	stateStopping
)

// Server serves the configured streams over WebSocket, plus /stats and
// /health. Build it with New, run it with Run; Close (or cancelling Run's
// context) shuts it down cleanly: every goroutine it started has ended when
// Run returns.
type Server struct {
	cfg     Config
	opts    Options
	logger  *log.Logger
	streams map[string]*stream
	ordered []*stream // config order
	names   []string  // sorted, for 4404's serves

	started     time.Time // monotonic base for ages and uptime
	startedWall time.Time

	state atomic.Int32
	ready chan struct{}
	addr  atomic.Pointer[net.Addr]

	// sup runs the maintenance children; nil when there are none. tierLogs
	// holds, per stream in config order, the log /stats reads the tiers of
	// (nil for a live-only stream); nil while the logs are not open.
	sup      atomic.Pointer[supervisor]
	tierLogs atomic.Pointer[[]*logstore.Log]

	runMu  sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}

	subUp websocket.Upgrader // small read buffer: subscribers send nothing
	pubUp websocket.Upgrader // larger read buffer: publishers stream frames in

	// mu guards conns and stopping. Registration checks stopping under it,
	// so shutdown's snapshot of conns misses no connection.
	mu         sync.Mutex
	conns      map[*wsConn]struct{}
	stopping   bool
	handlers   sync.WaitGroup // WebSocket handlers (each owns its connection's goroutines)
	pubReaders sync.WaitGroup // publisher read loops still able to queue rows
	committers sync.WaitGroup
	keepalive  sync.WaitGroup
}

// writeBufferPool gives gorilla a pool so it keeps no write buffer per
// connection: the server writes frames itself and gorilla only writes the
// handshake.
type writeBufferPool struct{ p sync.Pool }

func (w *writeBufferPool) Get() any  { return w.p.Get() }
func (w *writeBufferPool) Put(v any) { w.p.Put(v) }

// New validates cfg and builds a server; nothing is opened until Run.
func New(cfg Config, opts Options) (*Server, error) {
	schemas, err := cfg.compile()
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = log.New(io.Discard)
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = 20 * time.Second
	}
	if opts.ChildReadyTimeout <= 0 {
		opts.ChildReadyTimeout = DefaultChildReadyTimeout
	}
	if roles := cfg.Maintain.Roles(); len(roles) > 0 && opts.Executable == "" && slices.ContainsFunc(cfg.Streams, func(s StreamConfig) bool { return s.Durable }) {
		return nil, fmt.Errorf("maintain runs %d roles as child processes, but no streamcast executable was given to run them (Options.Executable); "+
			"give one, or set maintain: false to run none", len(roles))
	}
	s := &Server{
		cfg:         cfg,
		opts:        opts,
		logger:      opts.Logger,
		streams:     map[string]*stream{},
		names:       cfg.names(),
		started:     time.Now(),
		startedWall: time.Now(),
		ready:       make(chan struct{}),
		conns:       map[*wsConn]struct{}{},
	}
	pool := &writeBufferPool{}
	checkOrigin := func(*http.Request) bool { return true } // public data; auth is a later layer
	s.subUp = websocket.Upgrader{ReadBufferSize: 512, WriteBufferPool: pool, CheckOrigin: checkOrigin, HandshakeTimeout: 10 * time.Second}
	s.pubUp = websocket.Upgrader{ReadBufferSize: 64 << 10, WriteBufferPool: pool, CheckOrigin: checkOrigin, HandshakeTimeout: 10 * time.Second}
	for i, sc := range cfg.Streams {
		st := newStream(s, sc, schemas[i], cfg.Limits)
		s.streams[sc.Name] = st
		s.ordered = append(s.ordered, st)
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

	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	addr := ln.Addr()
	s.addr.Store(&addr)
	httpSrv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          stdlog.New(io.Discard, "", 0),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.Serve(ln) }()

	// Listening already (so /health answers 503 while starting); open logs.
	var opened []*stream
	for _, st := range s.ordered {
		if err := st.open(ctx, s.cfg.Root); err != nil {
			s.state.Store(stateStopping)
			_ = httpSrv.Close()
			<-serveErr
			for _, o := range opened {
				_ = o.closeLog()
			}
			return err
		}
		opened = append(opened, st)
	}
	tierLogs := make([]*logstore.Log, len(s.ordered))
	var writers []*logstore.Log
	for i, st := range s.ordered {
		if st.log != nil {
			tierLogs[i] = st.log
			writers = append(writers, st.log)
		}
	}
	s.tierLogs.Store(&tierLogs)
	sup, err := s.startMaintenance(ctx)
	if err != nil {
		s.state.Store(stateStopping)
		_ = httpSrv.Close()
		<-serveErr
		s.tierLogs.Store(nil)
		for _, o := range opened {
			_ = o.closeLog()
		}
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			s.logger.Info("stopped while starting")
			return nil
		}
		return err
	}
	for _, st := range s.ordered {
		if st.log != nil {
			s.committers.Add(1)
			go func() {
				defer s.committers.Done()
				st.commit()
			}()
		}
	}
	stopKeepalive := make(chan struct{})
	s.keepalive.Add(1)
	go func() {
		defer s.keepalive.Done()
		s.keepaliveLoop(stopKeepalive)
	}()

	s.state.Store(stateReady)
	close(s.ready)
	s.logger.Info("listening on "+addr.String(), "streams", len(s.ordered), "root", s.cfg.Root)
	if s.opts.OnReady != nil {
		s.opts.OnReady(addr)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		serveErr <- err
		if !errors.Is(err, http.ErrServerClosed) {
			runErr = fmt.Errorf("serve %s: %w", addr, err)
		}
	}
	s.shutdown(httpSrv, serveErr)
	close(stopKeepalive)
	s.keepalive.Wait()
	// Writes are fenced and the committers drained: flush and stop the
	// maintenance children (see supervisor.stop for the order).
	if sup != nil {
		sup.stop(writers)
	}
	s.tierLogs.Store(nil)
	for _, st := range s.ordered {
		if err := st.closeLog(); err != nil {
			s.logger.Error("close log", "stream", st.name, "err", err)
			if runErr == nil {
				runErr = err
			}
		}
	}
	s.logger.Info("stopped")
	return runErr
}

// startMaintenance starts one maintenance child per configured role over
// every durable log, and waits until each is ready. It returns nil when
// serve runs none.
func (s *Server) startMaintenance(ctx context.Context) (*supervisor, error) {
	var dirs []string
	for _, st := range s.ordered {
		if st.log == nil {
			continue
		}
		dir, err := filepath.Abs(st.log.Dir())
		if err != nil {
			return nil, fmt.Errorf("stream %q: %w", st.name, err)
		}
		dirs = append(dirs, dir)
	}
	if len(dirs) == 0 {
		return nil, nil
	}
	m := s.cfg.Maintain
	if !m.Runs(logstore.RoleSeal) {
		s.logger.Warn("serve runs no seal role (maintain: false, --no-maintain or maintain.seal_every: 0): rows stay in each log's buffer unless you run `streamcast maintain --role seal` yourself")
	}
	roles := m.Roles()
	if len(roles) == 0 {
		return nil, nil
	}
	sup := newSupervisor(s.opts.Executable, s.opts.ConfigFile, roles, dirs, m.FlushEvery, s.opts.ChildReadyTimeout, s.logger)
	sup.overrides = s.cfg.Tiers.maintainOverrides()
	s.sup.Store(sup)
	if err := sup.start(ctx); err != nil {
		s.sup.Store(nil)
		return nil, err
	}
	return sup, nil
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

// shutdown stops the server in the order that loses no acknowledged row.
func (s *Server) shutdown(httpSrv *http.Server, serveErr chan error) {
	s.state.Store(stateStopping)
	s.logger.Info("shutting down")
	s.mu.Lock()
	s.stopping = true
	conns := make([]*wsConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()

	// 1. Stop accepting.
	sctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	_ = httpSrv.Shutdown(sctx)
	cancel()
	_ = httpSrv.Close()
	<-serveErr

	// 2. Stop reading publishers; what they sent so far is accepted.
	for _, c := range conns {
		if c.pub != nil {
			c.pub.fence()
		}
	}
	for _, st := range s.ordered {
		st.inbox.stop()
	}
	s.pubReaders.Wait()

	// 3. Commit what was accepted, fan it out and acknowledge it.
	for _, st := range s.ordered {
		st.inbox.close()
	}
	s.committers.Wait()

	// 4. 1001 to every subscriber, after the frames queued for it
	// (publishers send theirs once their replies are written).
	for _, c := range conns {
		if c.pub == nil {
			c.close(websocket.CloseGoingAway, "server shutting down")
		}
	}
	if !waitTimeout(&s.handlers, 2*closeGrace) {
		s.logger.Warn("connections still open after the grace period; dropping them")
		for _, c := range conns {
			c.abort()
		}
		s.handlers.Wait()
	}
}

// waitTimeout waits for wg, reporting false when d passed first.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
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

// addPublisherReader counts a publisher read loop shutdown must wait for.
func (s *Server) addPublisherReader() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	s.pubReaders.Add(1)
	return true
}

// keepaliveLoop pings every connection each interval and drops a peer that
// sent nothing, not even a pong, since the previous ping.
func (s *Server) keepaliveLoop(stop <-chan struct{}) {
	t := time.NewTicker(s.opts.PingInterval)
	defer t.Stop()
	ping := controlFrame(opPing, nil)
	var conns []*wsConn
	for {
		select {
		case <-stop:
			return
		case <-t.C:
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

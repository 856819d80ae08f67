// The listening side of a running server: the TCP listener (wrapped in
// TLS under the tls: section), the bound on the connections it holds open,
// in total and per address, the http.Server that serves the handler chain
// on it with its timeouts, and its close. Upgraded WebSocket connections
// are hijacked out of the http.Server, so closing it leaves them to the
// server, which closes them in the order that loses no row; they still
// count against the bound until they close.
//
// Sockets must never take the descriptors the logs need: a commit that
// fails for want of a descriptor is an outage of the data path, so the
// total bound leaves a reserve under the process's descriptor limit, and
// the reserve grows with the durable logs served. A log idle for a while
// holds one descriptor, yet its next commit opens its SQLite files again:
// the reserve is what the logs may need, not what they hold now.

package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// connLimits bound what clients may hold open.
type connLimits struct {
	// IdleTimeout closes an HTTP keep-alive connection that waits this
	// long for its next request.
	IdleTimeout time.Duration
	// MaxConns bounds the connections open at once, WebSocket ones
	// included; 0 takes the descriptor limit less the reserve (Resolve).
	MaxConns int
	// MaxConnsPerAddr bounds the connections one remote address holds
	// open; 0 sets no bound per address.
	MaxConnsPerAddr int
}

// connListener serves one handler on one address until Close.
type connListener struct {
	ln     *limitListener
	logs   int // the durable logs MaxConns was resolved for; Server.lifeMu guards it
	http   *http.Server
	failed chan struct{} // closed when Serve returns
	err    error         // Serve's result, set before failed is closed

	stopOnce   sync.Once
	stopped    chan struct{} // closed when the Shutdown Stop began returns
	stopCancel context.CancelFunc
}

// listenConns opens a TCP listener on addr and starts serving h on it, within
// lim (see Resolve for MaxConns 0). With a TLS config it serves https and
// wss only: a plain request gets net/http's 400. errorLog receives
// net/http's own errors, accept errors among them; the caller rate-limits
// it.
func listenConns(addr string, conf *tls.Config, h http.Handler, lim connLimits, errorLog *log.Logger) (*connListener, error) {
	tcp, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	limited := &limitListener{Listener: tcp, maxPerAddr: lim.MaxConnsPerAddr, plain: conf == nil, perAddr: map[string]int{}}
	limited.max.Store(int64(lim.MaxConns))
	var ln net.Listener = limited
	if conf != nil {
		ln = tls.NewListener(ln, conf)
	}
	l := &connListener{
		ln: limited,
		http: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       lim.IdleTimeout,
			ErrorLog:          errorLog,
		},
		failed: make(chan struct{}),
	}
	go func() {
		l.err = l.http.Serve(ln)
		close(l.failed)
	}()
	return l, nil
}

// Addr is the address the listener accepts on.
func (l *connListener) Addr() net.Addr { return l.ln.Addr() }

// connCounts is what the listener has held and refused.
type connCounts struct {
	Open int64 // connections open now
	// RefusedTotal and RefusedPerAddr count connections closed at accept
	// for the total bound and for the bound per address.
	RefusedTotal, RefusedPerAddr int64
}

// Counts reports the connections open now and those refused so far.
func (l *connListener) Counts() connCounts {
	return connCounts{Open: l.ln.open.Load(), RefusedTotal: l.ln.refusedTotal.Load(), RefusedPerAddr: l.ln.refusedPerAddr.Load()}
}

// SetMaxConns changes the bound on the connections open at once, as the
// durable logs served change. Connections open over a lowered bound stay
// until they close; new ones wait for room.
func (l *connListener) SetMaxConns(n int) { l.ln.max.Store(int64(n)) }

// Failed is closed when serving ends before Close is called; Err then
// says why.
func (l *connListener) Failed() <-chan struct{} { return l.failed }

// Err is why serving ended, once Failed is closed.
func (l *connListener) Err() error {
	<-l.failed
	return l.err
}

// Stop stops accepting connections and ends each keep-alive connection
// after its request; requests in flight go on. An event stream is one
// (sse.go): it ends when the server closes it, after the rows committed
// before the stop, as a WebSocket subscriber does. Close waits for them.
func (l *connListener) Stop() {
	l.stopOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		l.stopped, l.stopCancel = make(chan struct{}), cancel
		go func() {
			defer close(l.stopped)
			_ = l.http.Shutdown(ctx)
		}()
	})
}

// Close stops accepting connections (Stop), gives requests in flight up to
// grace to finish, and waits for serving to end. It returns what ended
// serving, nil when it was Close.
func (l *connListener) Close(grace time.Duration) error {
	l.Stop()
	t := time.NewTimer(grace)
	select {
	case <-l.stopped:
	case <-t.C:
	}
	t.Stop()
	l.stopCancel()
	<-l.stopped
	_ = l.http.Close()
	if err := l.Err(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// The reserve of descriptors the connections may never take. Reserve is
// the share of the descriptor limit kept whatever the logs, and ReserveMin
// its floor: the maintenance children's pipes, a replay's data files, read
// connections beyond a log's first, a migration's second log. Each durable
// log served adds LogDescriptors, what it opens to commit and read: its
// lock file, buffer.db, -wal and -shm for the write connection, and
// buffer.db and -wal for a read connection (the -shm is shared). MinConns
// is the least the bound goes to, however small the limit, so that the
// server can still be reached; a limit that small is warned about.
const (
	Reserve        = 8 // one eighth
	ReserveMin     = 256
	LogDescriptors = 6
	MinConns       = 16
)

// reserve is the descriptors of the limit nofile kept from connections
// while logs durable logs are served.
func reserve(nofile uint64, logs int) int {
	n := int(min(nofile, 1<<30))
	return max(n/Reserve, ReserveMin) + logs*LogDescriptors
}

// connsLeft is what the limit nofile leaves to connections beside logs
// durable logs: nofile less its reserve, at least MinConns.
func connsLeft(nofile uint64, logs int) int {
	return max(int(min(nofile, 1<<30))-reserve(nofile, logs), MinConns)
}

// nofileFor is the least descriptor limit that leaves conns connections
// beside logs durable logs, for a warning to suggest.
func nofileFor(conns, logs int) uint64 {
	need := conns + logs*LogDescriptors
	// connsLeft grows with n; start just under where an eighth is the
	// reserve and step up.
	n := max(need+ReserveMin, need*Reserve/(Reserve-1)-Reserve)
	for connsLeft(uint64(n), logs) < conns {
		n++
	}
	return uint64(n)
}

// Resolve fills in MaxConns 0 from the process's descriptor limit nofile
// (0 when unknown) and the durable logs served: nofile less its reserve
// (Reserve, ReserveMin and LogDescriptors a log), and at least MinConns. A
// MaxConns set above that is lowered to it; clamped reports that it was,
// so the caller can say so.
func (lim connLimits) Resolve(nofile uint64, logs int) (out connLimits, clamped bool) {
	out = lim
	if nofile == 0 {
		if out.MaxConns == 0 {
			out.MaxConns = 10000
		}
		return out, false
	}
	budget := connsLeft(nofile, logs)
	switch {
	case out.MaxConns == 0:
		out.MaxConns = budget
	case out.MaxConns > budget:
		out.MaxConns, clamped = budget, true
	}
	return out, clamped
}

// limitListener counts the connections it hands out, by remote address,
// and closes those over its bounds at once: a plain connection first gets
// a 503 that says which bound and what to do, a TLS one only the close
// (its client expects a handshake, not HTTP).
type limitListener struct {
	net.Listener
	max        atomic.Int64 // SetMaxConns changes it as the logs served change
	maxPerAddr int
	plain      bool

	open                         atomic.Int64
	refusedTotal, refusedPerAddr atomic.Int64

	mu      sync.Mutex
	total   int
	perAddr map[string]int
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := hostOf(c.RemoteAddr())
		bound := int(l.max.Load())
		l.mu.Lock()
		overTotal := l.total >= bound
		overAddr := !overTotal && l.maxPerAddr > 0 && l.perAddr[host] >= l.maxPerAddr
		if !overTotal && !overAddr {
			l.total++
			l.perAddr[host]++
			l.mu.Unlock()
			l.open.Add(1)
			return &countedConn{Conn: c, l: l, host: host}, nil
		}
		l.mu.Unlock()
		if overTotal {
			l.refusedTotal.Add(1)
			l.refuse(c, fmt.Sprintf("the server holds as many connections as it allows (%d, limits.max_connections); retry shortly", bound))
		} else {
			l.refusedPerAddr.Add(1)
			l.refuse(c, fmt.Sprintf("your address holds as many connections as one address may (%d, limits.max_connections_per_address); close some of them, then retry", l.maxPerAddr))
		}
	}
}

// refuse closes c, over a bound, with a 503 saying why when it speaks
// plain HTTP. The write goes to a fresh socket's empty send buffer, so it
// does not block the accept loop; the deadline makes sure.
func (l *limitListener) refuse(c net.Conn, why string) {
	if l.plain {
		body := "streamcast: " + why + "\n"
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\nConnection: close\r\n" +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body))
	}
	_ = c.Close()
}

func (l *limitListener) release(host string) {
	l.mu.Lock()
	l.total--
	if n := l.perAddr[host] - 1; n > 0 {
		l.perAddr[host] = n
	} else {
		delete(l.perAddr, host)
	}
	l.mu.Unlock()
	l.open.Add(-1)
}

// countedConn gives its place back once, at its first Close, whoever
// closes it: net/http, or the broker after a hijack.
type countedConn struct {
	net.Conn
	l    *limitListener
	host string
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.host) })
	return err
}

// CloseWrite keeps half-closing possible through the wrapper, as net/http
// uses it on a plain connection it ends after a response.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// SyscallConn hands out the socket, as the broker writes replies to it
// directly when they must not wait.
func (c *countedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("the connection has no socket")
}

func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	s := a.String()
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		return s[:i]
	}
	return s
}

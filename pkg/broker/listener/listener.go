// Package listener is the listening side of a running server: the TCP
// listener (wrapped in TLS under the tls: section), the http.Server that
// serves the handler chain on it, and its close. Upgraded WebSocket
// connections are hijacked out of the http.Server, so closing it leaves
// them to the broker, which closes them in the order that loses no row.
package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"
)

// Listener serves one handler on one address until Close.
type Listener struct {
	ln     net.Listener
	http   *http.Server
	failed chan struct{} // closed when Serve returns
	err    error         // Serve's result, set before failed is closed
}

// Listen opens a TCP listener on addr and starts serving h on it. With a
// TLS config it serves https and wss only: a plain request gets net/http's
// 400.
func Listen(addr string, conf *tls.Config, h http.Handler) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if conf != nil {
		ln = tls.NewListener(ln, conf)
	}
	l := &Listener{
		ln: ln,
		http: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          log.New(io.Discard, "", 0),
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
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Failed is closed when serving ends before Close is called; Err then
// says why.
func (l *Listener) Failed() <-chan struct{} { return l.failed }

// Err is why serving ended, once Failed is closed.
func (l *Listener) Err() error {
	<-l.failed
	return l.err
}

// Close stops accepting connections, gives requests in flight up to grace
// to finish, and waits for serving to end. It returns what ended serving,
// nil when it was Close.
func (l *Listener) Close(grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	_ = l.http.Shutdown(ctx)
	cancel()
	_ = l.http.Close()
	if err := l.Err(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

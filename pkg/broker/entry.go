package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// This file is the one place connections come in: the listener, then a
// chain of HTTP middleware, then the routes (/stats, /health, /<stream>).
// Authentication, TLS (tls.go: the listener is wrapped in listen) and
// metrics plug in here.

// Middleware wraps the handler requests reach next. The server's own
// middleware (the Origin check, then authentication and grants) runs
// first, then Options.Middleware in order, then the routes.
type Middleware func(next http.Handler) http.Handler

// handler builds the chain every request goes through.
func (s *Server) handler() http.Handler {
	chain := append([]Middleware{s.checkOrigin, s.gate.Check}, s.opts.Middleware...)
	h := s.routes()
	for i := len(chain) - 1; i >= 0; i-- {
		h = chain[i](h)
	}
	return h
}

// routes dispatches a request that passed the middleware: a WebSocket
// upgrade on any path is a stream's; plain HTTP is /stats or /health.
func (s *Server) routes() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if websocket.IsWebSocketUpgrade(r) {
			s.serveStream(w, r)
			return
		}
		s.serveHTTP(w, r)
	})
}

// checkOrigin refuses, before the upgrade, a browser's WebSocket request
// from an origin allowed_origins does not list (403). A request without an
// Origin header (wscat, the Go client, any non-browser) is not a browser's
// cross-site request, and passes.
func (s *Server) checkOrigin(next http.Handler) http.Handler {
	allowed := s.cfg.AllowedOrigins
	if len(allowed) == 0 || slices.Contains(allowed, "*") {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" && websocket.IsWebSocketUpgrade(r) && !slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(a, origin) }) {
			http.Error(w, fmt.Sprintf("origin %q may not open WebSockets on this server; allowed_origins lists the origins that may", origin), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// entry is the listening side of a running server.
type entry struct {
	ln   net.Listener
	http *http.Server
	done chan error // Serve's result
}

// listen opens the listener and starts serving the handler chain.
func (s *Server) listen() (*entry, error) {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	if s.certs != nil {
		// https and wss only: a plain request gets net/http's 400.
		ln = tls.NewListener(ln, s.certs.ListenerConfig())
	}
	e := &entry{
		ln: ln,
		http: &http.Server{
			Handler:           s,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          stdlog.New(io.Discard, "", 0),
		},
		done: make(chan error, 1),
	}
	go func() { e.done <- e.http.Serve(ln) }()
	return e, nil
}

// failed delivers Serve's result should it end before close is called
// (whoever receives it puts it back for close).
func (e *entry) failed() <-chan error { return e.done }

// close stops accepting connections and waits for Serve to return.
// Upgraded WebSocket connections are hijacked, so they are not closed here:
// the streams close them, in the order that loses no row.
func (e *entry) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	_ = e.http.Shutdown(ctx)
	cancel()
	_ = e.http.Close()
	err := <-e.done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

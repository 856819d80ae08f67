package broker

import (
	"context"
	"crypto/tls"
	"fmt"
	stdlog "log"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gorilla/websocket"
	"github.com/streamcast/streamcast/pkg/wire"
)

// This file is the one place connections come in: the listener
// (listener.go), then a chain of HTTP middleware, then the routes (/stats,
// /health, /<stream>). Authentication (gate.go), TLS (the listener is
// wrapped in it) and metrics plug in here.

// listen opens the listener and starts serving the handler chain, within
// the limits: section's bounds on connections. The bound in total leaves
// a reserve of descriptors for the durable streams configured; start
// resolves it again once it knows every log served (reserveForLogs).
func (s *Server) listen() (*connListener, error) {
	var conf *tls.Config
	if s.certs != nil {
		conf = s.certs.ListenerConfig()
	}
	logs := 0
	for _, st := range s.reg.List() {
		if st.cfg.Durable {
			logs++
		}
	}
	lim := s.connLimits(descriptorLimit(), logs, true)
	ent, err := listenConns(s.cfg.Listen, conf, s, lim, stdlog.New(httpErrorLog{s}, "", 0))
	if err != nil {
		return nil, err
	}
	ent.logs = logs
	s.entry.Store(ent)
	return ent, nil
}

// reserveForLogs resolves the bound on connections again for logs durable
// logs, the ones served now: a stream started or retired changes what the
// logs may need to commit. It warns when the limit is too small for them
// as they grow. lifeMu is held.
func (s *Server) reserveForLogs(logs int) {
	ent := s.entry.Load()
	if ent == nil || ent.logs == logs {
		return
	}
	grew := logs > ent.logs
	ent.logs = logs
	ent.SetMaxConns(s.connLimits(descriptorLimit(), logs, grew).MaxConns)
}

// connLimits resolves the limits: section's bounds for the descriptor
// limit nofile and logs durable logs (connLimits.Resolve), and with warn
// set says when nofile leaves fewer connections than
// limits.max_connections asks for, or, when it asks for none in
// particular, fewer than ReserveMin.
func (s *Server) connLimits(nofile uint64, logs int, warn bool) connLimits {
	want := s.cfg.Limits.MaxConnections
	lim, clamped := connLimits{
		IdleTimeout:     s.cfg.Limits.IdleTimeout,
		MaxConns:        want,
		MaxConnsPerAddr: s.cfg.Limits.MaxConnectionsPerAddress,
	}.Resolve(nofile, logs)
	if !warn || nofile == 0 {
		return lim
	}
	kept := fmt.Sprintf("the descriptor limit is %d, and serve keeps %d descriptors from connections for its %d durable logs (%d a log) and the rest of the process",
		nofile, reserve(nofile, logs), logs, LogDescriptors)
	raise := "raise the limit (ulimit -n, or LimitNOFILE= in a systemd unit)"
	switch {
	case clamped:
		s.logger.Warn(fmt.Sprintf("limits.max_connections is %d, but %s: serving at most %d connections; %s to %d to serve %d",
			want, kept, lim.MaxConns, raise, nofileFor(want, logs), want))
	case want == 0 && lim.MaxConns < ReserveMin:
		s.logger.Warn(fmt.Sprintf("%s, so it holds at most %d connections; %s to at least %d",
			kept, lim.MaxConns, raise, nofileFor(ReserveMin, logs)))
	}
	return lim
}

// httpErrorLog takes net/http's own error lines. A failing accept (the
// descriptor limit reached, say) is logged, at most once a minute with a
// count; the rest (a TLS handshake a scanner broke off, …) is noise in
// production and goes to the debug level.
type httpErrorLog struct{ s *Server }

func (h httpErrorLog) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	if strings.Contains(line, "Accept error") {
		h.s.commitErrs.Error(context.Background(), "accept", "accepting a connection failed; net/http retries, while new clients wait", "err", line)
	} else {
		h.s.logger.Debug(line)
	}
	return len(p), nil
}

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
// upgrade on any path but the reserved ones is a stream's; plain HTTP is
// /stats, /health and the rest of serveHTTP's routes.
func (s *Server) routes() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if websocket.IsWebSocketUpgrade(r) && r.URL.Path == "/health" {
			// Never a stream (meta.CheckName reserves the name), and
			// the gate checks no credentials for it.
			http.Error(w, "/health answers a plain GET, not a WebSocket upgrade", http.StatusBadRequest)
			return
		}
		if websocket.IsWebSocketUpgrade(r) {
			s.serveStream(w, r)
			return
		}
		s.serveHTTP(w, r)
	})
}

// checkOrigin refuses, before the upgrade, a browser's WebSocket request
// (or HTTP publish: a form on another site may POST without asking) from
// an origin allowed_origins does not list (403). Without a list, a
// server with an auth: section admits only pages from its own origin: a
// browser sends a logged-in user's Basic credentials to any page's
// WebSocket, so another site could otherwise read and publish as that
// user. "*" admits every origin. A request without an Origin header
// (wscat, the Go client, any non-browser) is not a browser's cross-site
// request, and passes.
//
// A page from an admitted origin may also read an event stream and publish
// with fetch: those answers, refusals included, carry the CORS headers
// that let it read them, and a CORS preflight for a stream (the browser's
// OPTIONS before a POST with a JSON body or an Authorization header, sent
// without credentials) is answered here, before authentication.
func (s *Server) checkOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		preflight, publish := isPreflight(r), isHTTPPublish(r)
		origin := r.Header.Get("Origin")
		cors := origin != "" && (preflight || publish)
		if websocket.IsWebSocketUpgrade(r) || publish || preflight {
			if msg := s.originRefusal(r); msg != "" {
				http.Error(w, msg, http.StatusForbidden)
				return
			}
		} else if origin != "" && wantsEvents(r) {
			// An event stream's origin refusal is serveEvents's, after
			// the grants; its headers go only to an origin it will admit.
			cors = s.originRefusal(r) == ""
		}
		if cors {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Add("Vary", "Origin")
			if !preflight {
				h.Set("Access-Control-Expose-Headers", "Retry-After")
			}
		}
		if preflight {
			h := w.Header()
			h.Set("Access-Control-Allow-Methods", "GET, POST")
			h.Set("Access-Control-Allow-Headers", corsRequestHeaders)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// corsRequestHeaders are the headers a page may send with an event stream
// or a publish: credentials, the body's type, an EventSource's resume
// point and an exactly-once publisher's marks.
const corsRequestHeaders = "Authorization, Content-Type, Last-Event-ID, " + wire.PublisherHeader + ", " + wire.SeqHeader

// isPreflight reports whether r is a CORS preflight for a stream's GET or
// POST (the control API's paths are not a stream's).
func isPreflight(r *http.Request) bool {
	if r.Method != http.MethodOptions || r.Header.Get("Origin") == "" {
		return false
	}
	switch r.Header.Get("Access-Control-Request-Method") {
	case http.MethodGet, http.MethodPost:
	default:
		return false
	}
	return !isControlPath(r.URL.Path)
}

// originRefusal is checkOrigin's verdict on a request for a stream, a
// WebSocket upgrade, an HTTP publish or an event stream: "" to admit it, or
// why not.
func (s *Server) originRefusal(r *http.Request) string {
	allowed := s.cfg.AllowedOrigins
	origin := r.Header.Get("Origin")
	if origin == "" || slices.Contains(allowed, "*") {
		return ""
	}
	switch {
	case len(allowed) > 0:
		if !slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(a, origin) }) {
			return fmt.Sprintf("origin %q may not open WebSockets or event streams, or publish, on this server; allowed_origins lists the origins that may", origin)
		}
	case s.gate.Enabled() && !sameOrigin(origin, r.Host):
		return fmt.Sprintf("origin %q is another site than this server (%s), and with an auth: section only the server's own pages may open WebSockets or event streams, or publish; "+
			"list the origin in allowed_origins to let its pages in", origin, r.Host)
	}
	return ""
}

// sameOrigin reports whether origin (scheme://host[:port]) names host, the
// request's Host header, as the browser would for a page served here.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}

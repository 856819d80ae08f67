package broker

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/broker/auth"
	"github.com/streamcast/streamcast/pkg/broker/config"
)

// This file is authentication and authorisation at the entry: the auth:
// section's users and grants, checked before any stream lookup, query
// parsing or WebSocket upgrade (docs/design.md §3.2). Without an auth:
// section every request is let through as it always was.

// checkAuth authenticates every request but /health and, for a WebSocket
// upgrade, checks the grant for the stream and action asked before any
// other part of the server sees the request: missing or bad credentials
// get 401 with a Basic challenge, a principal without the grant 403. Plain
// HTTP routes check their own grant (/stats, /metrics) with the access
// this puts in the request's context.
func (s *Server) checkAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pol := s.auth.Load()
		if pol == nil || r.URL.Path == "/health" {
			next.ServeHTTP(w, r)
			return
		}
		who, ok := s.authenticate(w, r, pol)
		if !ok {
			return
		}
		a := auth.Access{Policy: pol, Who: who}
		if websocket.IsWebSocketUpgrade(r) {
			stream, action := auth.StreamAction(r)
			if !a.Allows(action, stream) {
				s.refuseAccess(w, a, fmt.Sprintf("%s stream %q", action, stream))
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(auth.WithAccess(r.Context(), a)))
	})
}

// authenticate returns the principal r's credentials name (auth.Anonymous
// without any). It answers 401 itself for bad credentials, and 429 while
// r's address serves a backoff for failing too often; a pair verified
// recently passes even then, so a client that knows its password is not
// held up by a neighbour behind the same address guessing.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, pol *auth.Policy) (auth.Principal, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		// Under mutual TLS the verified certificate's CN names the
		// principal, matched against the grants as a user name.
		if cn, ok := PrincipalFromTLS(r); ok {
			return cn, true
		}
		return auth.Anonymous, true
	}
	addr := auth.RemoteHost(r)
	user, password, ok := auth.ParseBasic(h)
	if ok && pol.Cached(user, password) {
		return user, true
	}
	if wait := s.backoff.Wait(addr); wait > 0 {
		secs := int(math.Ceil(wait.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		http.Error(w, auth.BackoffRefusal(addr, secs), http.StatusTooManyRequests)
		return "", false
	}
	if ok {
		who, err := pol.Authenticate(r.Context(), user, password)
		if err == nil {
			s.backoff.Succeed(addr)
			return who, true
		}
		if r.Context().Err() != nil {
			return "", false // the client went away while another checked the same pair
		}
	}
	s.authFailed(addr, user, ok, pol)
	w.Header().Set("WWW-Authenticate", auth.Challenge)
	http.Error(w, auth.LoginRefusal(ok), http.StatusUnauthorized)
	return "", false
}

// authFailed counts and logs a failed login. The line names the address
// and, only when it is a configured user, the user name: what a client
// typed as a name may be a password typed in the wrong field.
func (s *Server) authFailed(addr, user string, parsed bool, pol *auth.Policy) {
	s.authFailures.Add(1)
	s.RecordAuthFailure(http.StatusUnauthorized)
	f := s.backoff.Fail(addr)
	if !f.Log {
		return
	}
	s.logger.Warn("authentication failed", auth.FailureLog(addr, user, parsed, pol, f)...)
}

// refuseAccess answers a request whose principal lacks the grant for
// what: 401 with a challenge when it sent no credentials (it may have some
// that would do), 403 when it did.
func (s *Server) refuseAccess(w http.ResponseWriter, a auth.Access, what string) {
	status, msg := auth.Refusal(a, what)
	s.RecordAuthFailure(status)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", auth.Challenge)
	}
	http.Error(w, msg, status)
}

// AuthorizeMetrics is the access rule of GET /metrics, for its route:
// public (metrics.public: true) lets everyone in; otherwise the request
// needs stats on "*", as /stats's process-wide figures do. It answers 401
// or 403 itself and returns false when the route must not serve r. With
// no auth: section everyone may.
func (s *Server) AuthorizeMetrics(w http.ResponseWriter, r *http.Request, public bool) bool {
	a := auth.AccessOf(r)
	if public || a.Everywhere(config.ActionStats) {
		return true
	}
	s.refuseAccess(w, a, `read /metrics (it needs stats on "*")`)
	return false
}

// AuthFailures counts failed logins since the server started: bad or
// unparsable credentials, not requests refused for lack of a grant.
func (s *Server) AuthFailures() int64 { return s.authFailures.Load() }

// newPolicy compiles a validated auth: section; nil for none.
func newPolicy(a *config.Auth, clock func() time.Time) *auth.Policy {
	if a == nil {
		return nil
	}
	return auth.New(a, clock)
}

// warnOpen logs, when there is no auth: section and the server listens on
// an address other than loopback, that anyone who can reach it may read,
// publish and see stats.
func (s *Server) warnOpen(addr net.Addr) {
	if s.auth.Load() != nil {
		return
	}
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		return
	}
	s.logger.Warn("serving without authentication on "+addr.String()+", which is not a loopback address: anyone who can reach it may read and publish every stream and read /stats; "+
		"add an auth: section (users and grants) to the config, or listen on 127.0.0.1", "listen", addr.String())
}

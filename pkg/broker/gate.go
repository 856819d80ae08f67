// The server's entry check (authGate): it authenticates every request
// against the auth: section's users and checks the grant a WebSocket
// upgrade needs, before any stream lookup, query parsing or upgrade
// (docs/design.md §3.2), and slows down addresses that keep failing to log
// in. Without an auth: section every request is let through. The handler
// chain (entry.go) puts it first, and a reload swaps its policy.

package broker

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/broker/auth"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// authGate checks requests at the entry. Its policy is swapped whole by Set,
// so a request sees one auth: section from start to end. Safe for
// concurrent use.
type authGate struct {
	// policy is the compiled auth: section, nil when there is none
	// (everyone may do everything). backoff slows down addresses that keep
	// failing to log in, across Sets.
	policy   atomic.Pointer[auth.Policy]
	backoff  *auth.Backoff
	limit    *auth.Limiter // bcrypt at once, across Sets
	failures atomic.Int64
	clock    func() time.Time
	logger   *log.Logger
	record   func(status int) // counts a 401, 403, 429 or 503 for /metrics
}

// newAuthGate builds the gate of the validated auth: section a (nil for none).
// clock times the login backoff and the credential cache; record is called
// with the status of every request refused for its credentials or grants,
// for a login's backoff (429) or for the server's bound on the logins it
// checks at once (503).
func newAuthGate(a *config.Auth, clock func() time.Time, logger *log.Logger, record func(status int)) *authGate {
	g := &authGate{backoff: auth.NewBackoff(clock), limit: auth.DefaultLimiter(), clock: clock, logger: logger, record: record}
	g.Set(a)
	return g
}

// Set puts the validated auth: section a in force for the requests that
// come after (nil: no authentication).
func (g *authGate) Set(a *config.Auth) {
	if a == nil {
		g.policy.Store(nil)
		return
	}
	g.policy.Store(auth.New(a, g.clock, g.limit))
}

// Enabled reports whether an auth: section is in force.
func (g *authGate) Enabled() bool { return g.policy.Load() != nil }

// Check authenticates every request but a plain GET of /health and, for a WebSocket
// upgrade, checks the grant for the stream and action asked before any
// other part of the server sees the request: missing or bad credentials
// get 401 with a Basic challenge, a principal without the grant 403. Plain
// HTTP routes check their own grant (/stats, /metrics) with the access
// this puts in the request's context.
func (g *authGate) Check(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pol := g.policy.Load()
		if pol == nil || (r.URL.Path == "/health" && !websocket.IsWebSocketUpgrade(r)) {
			next.ServeHTTP(w, r)
			return
		}
		who, ok := g.authenticate(w, r, pol)
		if !ok {
			return
		}
		a := auth.Access{Policy: pol, Who: who}
		if websocket.IsWebSocketUpgrade(r) {
			stream, action := auth.StreamAction(r)
			if !a.Allows(action, stream) {
				g.Refuse(w, a, fmt.Sprintf("%s stream %q", action, stream))
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(auth.WithAccess(r.Context(), a)))
	})
}

// authenticate returns the principal r's credentials name (auth.Anonymous
// without any). It answers itself when it returns false: 401 for bad
// credentials, 429 while r's address and user name serve a backoff for
// failing too often, 503 when the server is checking as many logins as it
// allows. A pair verified recently passes without a check, so a client
// that knows its password is served even while a neighbour behind the
// same address guesses at the same user.
func (g *authGate) authenticate(w http.ResponseWriter, r *http.Request, pol *auth.Policy) (auth.Principal, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		// Under mutual TLS the verified certificate's CN names the
		// principal, matched against the grants as a user name.
		if cn, ok := principalFromTLS(r); ok {
			return cn, true
		}
		return auth.Anonymous, true
	}
	addr := auth.RemoteHost(r)
	user, password, parsed := wire.ParseBasic(h)
	key := auth.LoginKey(addr, user, pol)
	if !parsed {
		// Nothing to compare, but it counts: a client sending garbage
		// is slowed like one sending wrong passwords.
		if wait := g.backoff.Attempt(key); wait > 0 {
			g.refuseBackoff(w, addr, wait)
			return "", false
		}
		g.failed(w, addr, user, false, key, pol)
		return "", false
	}
	if pol.Cached(user, password) {
		// Not a proof that resets the backoff: a guesser behind the same
		// address as a client reconnecting must not win fresh attempts.
		return user, true
	}
	var waited time.Duration
	who, err := pol.Authenticate(r.Context(), user, password, func() error {
		waited = g.backoff.Attempt(key)
		if waited > 0 {
			return errBackoff
		}
		return nil
	})
	switch {
	case err == nil:
		g.backoff.Succeed(key)
		return who, true
	case errors.Is(err, errBackoff):
		g.refuseBackoff(w, addr, waited)
	case errors.Is(err, auth.ErrBusy):
		g.backoff.Abandon(key)
		g.record(http.StatusServiceUnavailable)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the server is checking too many logins at once; retry in 1 s", http.StatusServiceUnavailable)
	case r.Context().Err() != nil:
		// The client went away while its check waited.
	default:
		g.failed(w, addr, user, true, key, pol)
	}
	return "", false
}

// errBackoff is the admission refusal authenticate hands auth.Authenticate
// for a login serving a backoff.
var errBackoff = errors.New("login in backoff")

// refuseBackoff answers 429 for a login that must wait.
func (g *authGate) refuseBackoff(w http.ResponseWriter, addr string, wait time.Duration) {
	secs := int(math.Ceil(wait.Seconds()))
	g.record(http.StatusTooManyRequests)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	http.Error(w, auth.BackoffRefusal(addr, secs), http.StatusTooManyRequests)
}

// failed counts, logs and answers a failed login. The line names the
// address and, only when it is a configured user, the user name: what a
// client typed as a name may be a password typed in the wrong field.
func (g *authGate) failed(w http.ResponseWriter, addr, user string, parsed bool, key auth.Key, pol *auth.Policy) {
	g.failures.Add(1)
	g.record(http.StatusUnauthorized)
	if f := g.backoff.Failed(key); f.Log {
		g.logger.Warn("authentication failed", auth.FailureLog(addr, user, parsed, pol, f)...)
	}
	w.Header().Set("WWW-Authenticate", auth.Challenge)
	http.Error(w, auth.LoginRefusal(parsed), http.StatusUnauthorized)
}

// Refuse answers a request whose principal lacks the grant for
// what: 401 with a challenge when it sent no credentials (it may have some
// that would do), 403 when it did.
func (g *authGate) Refuse(w http.ResponseWriter, a auth.Access, what string) {
	status, msg := auth.Refusal(a, what)
	g.record(status)
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
func (g *authGate) AuthorizeMetrics(w http.ResponseWriter, r *http.Request, public bool) bool {
	a := auth.AccessOf(r)
	if public || a.Everywhere(config.ActionStats) {
		return true
	}
	g.Refuse(w, a, `read /metrics (it needs stats on "*")`)
	return false
}

// Failures counts failed logins since the server started: bad or
// unparsable credentials, not requests refused for lack of a grant.
func (g *authGate) Failures() int64 { return g.failures.Load() }

// WarnOpen logs, when there is no auth: section and the server listens on
// an address other than loopback, that anyone who can reach it may read,
// publish and see stats.
func (g *authGate) WarnOpen(addr net.Addr) {
	if g.policy.Load() != nil {
		return
	}
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		return
	}
	g.logger.Warn("serving without authentication on "+addr.String()+", which is not a loopback address: anyone who can reach it may read and publish every stream and read /stats; "+
		"add an auth: section (users and grants) to the config, or listen on 127.0.0.1", "listen", addr.String())
}

// principalFromTLS returns the principal a request's client certificate
// names: the common name of the verified leaf, when the server runs mutual
// TLS (tls.client_ca_file) and the name is not empty. ok is false for a
// request without a verified client certificate, over plain HTTP or
// one-way TLS. Authorization maps the name to grants exactly as it maps a
// user name; the name is as trustworthy as the CA that signed it.
func principalFromTLS(r *http.Request) (principal string, ok bool) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return "", false
	}
	cn := r.TLS.VerifiedChains[0][0].Subject.CommonName
	return cn, cn != ""
}

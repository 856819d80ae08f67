package auth

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/streamcast/streamcast/pkg/meta/config"
)

// This file is what the broker's entry middleware decides with: the
// access a request was admitted with, the stream and action an upgrade
// asks for, the address failures are counted against, and the words of
// every refusal.

// Challenge is the WWW-Authenticate value of every 401.
const Challenge = `Basic realm="streamcast"`

// Access is who a request was admitted as, under which policy; a nil
// Policy admits everyone to everything.
type Access struct {
	Policy *Policy
	Who    Principal
}

type accessKey struct{}

// WithAccess returns ctx carrying a, for AccessOf.
func WithAccess(ctx context.Context, a Access) context.Context {
	return context.WithValue(ctx, accessKey{}, a)
}

// AccessOf is the access r was admitted with (WithAccess); the zero
// Access, which admits everyone, when there is none.
func AccessOf(r *http.Request) Access {
	a, _ := r.Context().Value(accessKey{}).(Access)
	return a
}

// Allows reports whether the admitted principal holds action on stream.
func (a Access) Allows(action, stream string) bool {
	return a.Policy == nil || a.Policy.Allows(a.Who, action, stream)
}

// Everywhere reports whether it holds action on "*".
func (a Access) Everywhere(action string) bool {
	return a.Policy == nil || a.Policy.AllowsEverywhere(a.Who, action)
}

// Any reports whether it holds action on at least one stream pattern.
func (a Access) Any(action string) bool {
	return a.Policy == nil || a.Policy.AllowsAny(a.Who, action)
}

// Filter keeps the names on which it holds action.
func (a Access) Filter(action string, names []string) []string {
	if a.Policy == nil {
		return names
	}
	return a.Policy.Filter(a.Who, action, names)
}

// StreamAction is the stream an upgrade asks for and whether it reads or
// publishes, read exactly as wire.ParseRequest will read them (same path
// rule, same query decoder), so the grant checked is the one used. A query
// that does not decode is refused 4400 after the upgrade whatever it
// asked, so it needs only read.
func StreamAction(r *http.Request) (stream, action string) {
	stream = strings.TrimPrefix(r.URL.Path, "/")
	q, err := url.ParseQuery(r.URL.RawQuery)
	if _, pub := q["publish"]; err == nil && pub {
		return stream, config.ActionPublish
	}
	return stream, config.ActionRead
}

// RemoteHost is the address a request came from, without its port: the
// key of the failure backoff. Proxy headers are not trusted.
func RemoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Refusal is the answer to a request whose principal lacks the grant for
// what: 401 (to be sent with Challenge) when it sent no credentials (it
// may have some that would do), 403 when it did.
func Refusal(a Access, what string) (status int, msg string) {
	if a.Who == Anonymous {
		return http.StatusUnauthorized, "authentication required to " + what + "; send a user name and password (HTTP Basic) (401)"
	}
	return http.StatusForbidden, fmt.Sprintf("user %q may not %s; ask the server's operator for a grant in its auth: section (403)", a.Who, what)
}

// LoginRefusal is the 401 message for credentials that failed: parsed
// says whether the Authorization header was Basic credentials at all.
func LoginRefusal(parsed bool) string {
	if !parsed {
		return "the Authorization header is not HTTP Basic credentials; send Basic with a user name and password (401)"
	}
	return "unknown user or wrong password; check the user name and password (401)"
}

// BackoffRefusal is the 429 message for a login from addr serving a
// backoff of secs seconds.
func BackoffRefusal(addr string, secs int) string {
	return fmt.Sprintf("too many failed logins from %s with this user name; retry in %d s with the right user name and password", addr, secs)
}

// FailureLog is the key-value pairs of the log line for a failed login
// from addr. It names the user only when it is one of pol's users: what a
// client typed as a name may be a password typed in the wrong field.
func FailureLog(addr, user string, parsed bool, pol *Policy, f Failure) []any {
	args := []any{"remote", addr, "failures_in_a_row", f.InARow}
	switch {
	case !parsed:
		args = append(args, "why", "not Basic credentials")
	case pol.IsUser(user):
		args = append(args, "user", user, "why", "wrong password")
	default:
		args = append(args, "why", "unknown user")
	}
	if f.Delay > 0 {
		args = append(args, "backoff", f.Delay.String())
	}
	if f.Unlogged > 0 {
		args = append(args, "not_logged_since_last_line", f.Unlogged)
	}
	return args
}

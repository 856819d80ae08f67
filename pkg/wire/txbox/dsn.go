// The database URL the outbox and inbox commands take
// (sqlite:///abs/path.db, sqlite://relative/path.db, postgres://...), read
// into the kind of database and the data source to open (ParseDSN). This
// file opens nothing; OpenDSN opens what it returns.

package txbox

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// Target is what a DSN names: the kind of database and the data source to
// hand its database/sql driver (txbox's Dialect.DriverName).
type Target struct {
	Kind Dialect
	// Source is the driver's data source: for SQLite a file: URI, as
	// modernc.org/sqlite reads it, with WAL,
	// a busy timeout and immediate transactions; for Postgres the DSN as
	// given, which pgx reads.
	Source string
	// Path is the SQLite file, for messages; "" for Postgres.
	Path string
}

// How each refusal ends: the forms a DSN takes.
const forms = "give sqlite:///abs/path.db, sqlite://relative/path.db or postgres://user@host/db"

// ParseDSN reads dsn. A SQLite file gets WAL and a busy timeout, so the
// application and a sender process can share it; a query given after the
// path is appended to those. A refusal never quotes what may be a password.
func ParseDSN(dsn string) (Target, error) {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		// A DSN with an @ may hold a password: it is not quoted.
		if strings.Contains(dsn, "@") {
			return Target{}, errors.New("the DSN has no scheme (no \"://\"); " + forms)
		}
		return Target{}, fmt.Errorf("DSN %q has no scheme; %s", dsn, forms)
	}
	switch strings.ToLower(scheme) {
	case "sqlite", "sqlite3":
		path, query, _ := strings.Cut(rest, "?")
		if path == "" {
			return Target{}, fmt.Errorf("DSN %q names no file; give sqlite:///abs/path.db or sqlite://relative/path.db", dsn)
		}
		if p, err := url.PathUnescape(path); err == nil {
			path = p
		}
		path = filepath.FromSlash(path)
		q := "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"
		if query != "" {
			q += "&" + query
		}
		return Target{Kind: SQLite, Source: "file:" + path + "?" + q, Path: path}, nil
	case "postgres", "postgresql":
		return Target{Kind: Postgres, Source: dsn}, nil
	}
	if !validScheme(scheme) {
		// What stands before "://" is then not a scheme, and may be a
		// mistyped user:password@host: it is not quoted.
		return Target{}, errors.New("the DSN does not start with a scheme (letters, digits, +, - or . before \"://\"); " + forms)
	}
	return Target{}, fmt.Errorf("DSN scheme %q is not one this package speaks; %s", scheme, forms)
}

// validScheme reports whether s is a URL scheme (RFC 3986 §3.1): a letter,
// then letters, digits, "+", "-" or ".".
func validScheme(s string) bool {
	for i, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// Redact returns a postgres DSN fit for a message: without its password,
// or a stand-in when it does not parse as a URL.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "the postgres DSN"
	}
	return u.Redacted()
}

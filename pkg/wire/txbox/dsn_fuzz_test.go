package txbox

import (
	"strings"
	"testing"
)

// FuzzParse: any DSN parses or is refused with an error; it never panics,
// a postgres DSN's password never appears in the error, and what parses
// names a kind and a source.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"sqlite:///tmp/x.db", "sqlite://rel/x.db?_pragma=foo", "sqlite3://", "sqlite://",
		"postgres://u:secret@127.0.0.1:5432/db?sslmode=disable", "postgresql://u:secret@[::1]/db",
		"postgres://u:secret@host:notaport/db", "mysql://x", "no-scheme", "://", "sqlite:///%zz",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		tg, err := ParseDSN(dsn)
		if err != nil {
			if strings.Contains(dsn, "://") && strings.Contains(dsn, ":secret@") && strings.Contains(err.Error(), "secret") {
				t.Fatalf("ParseDSN(%q) quotes the password: %v", dsn, err)
			}
			return
		}
		if tg.Kind == 0 || tg.Source == "" || (tg.Kind == SQLite) != (tg.Path != "") {
			t.Fatalf("ParseDSN(%q) = %+v: a kind, a source and, for SQLite only, a path", dsn, tg)
		}
		_ = Redact(dsn)
	})
}

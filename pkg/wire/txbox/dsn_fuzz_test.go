package txbox

import (
	"strings"
	"testing"
)

// FuzzOpenDSN: any DSN opens a handle or is refused with an error; it never
// panics, and a postgres DSN's password never appears in the error.
func FuzzOpenDSN(f *testing.F) {
	for _, s := range []string{
		"sqlite:///tmp/x.db", "sqlite://rel/x.db?_pragma=foo", "sqlite3://", "sqlite://",
		"postgres://u:secret@127.0.0.1:5432/db?sslmode=disable", "postgresql://u:secret@[::1]/db",
		"postgres://u:secret@host:notaport/db", "mysql://x", "no-scheme", "://", "sqlite:///%zz",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		db, _, err := OpenDSN(dsn)
		if err != nil {
			if strings.Contains(dsn, "://") && strings.Contains(dsn, ":secret@") && strings.Contains(err.Error(), "secret") {
				t.Fatalf("OpenDSN(%q) quotes the password: %v", dsn, err)
			}
			return
		}
		_ = db.Close() // sql.Open connects lazily: nothing was opened
	})
}

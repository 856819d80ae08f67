package txbox

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/streamcast/streamcast/internal/testkit"
)

func TestRebindNumbersPlaceholdersForPostgresOnly(t *testing.T) {
	for _, tc := range []struct {
		d    Dialect
		in   string
		want string
	}{
		{SQLite, "SELECT a FROM t WHERE b = ? AND c = ?", "SELECT a FROM t WHERE b = ? AND c = ?"},
		{Postgres, "SELECT a FROM t WHERE b = ? AND c = ?", "SELECT a FROM t WHERE b = $1 AND c = $2"},
		{Postgres, "SELECT 1", "SELECT 1"},
	} {
		if got := tc.d.Rebind(tc.in); got != tc.want {
			t.Errorf("%v.Rebind(%q) = %q, want %q", tc.d, tc.in, got, tc.want)
		}
	}
}

// TestCreateTablesIsIdempotentOnBothDialects runs the DDL twice on a real
// SQLite file and a real PostgreSQL server, then writes and reads a row
// through each outbox table, so a column type one dialect refuses fails here.
func TestCreateTablesIsIdempotentOnBothDialects(t *testing.T) {
	ctx := context.Background()
	t.Run("sqlite", func(t *testing.T) {
		db, d, err := OpenDSN("sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "app.db")))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		checkTables(t, ctx, db, d)
	})
	t.Run("postgres", func(t *testing.T) {
		pg := testkit.StartPostgres(t)
		db, d, err := OpenDSN(pg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		checkTables(t, ctx, db, d)
	})
}

func checkTables(t *testing.T, ctx context.Context, db *sql.DB, d Dialect) {
	t.Helper()
	for i := 0; i < 2; i++ {
		if err := CreateTables(ctx, db, d); err != nil {
			t.Fatalf("CreateTables, run %d: %v", i+1, err)
		}
	}
	for _, q := range []string{
		"INSERT INTO " + OutboxTable + " (publisher, seq, row) VALUES (?, ?, ?)",
		"INSERT INTO " + DeadLetterTable + " (publisher, seq, row, reason) VALUES (?, ?, ?, 'r')",
	} {
		if _, err := db.ExecContext(ctx, d.Rebind(q), "p", int64(1)<<40, `{"a":1}`); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var seq int64
	if err := db.QueryRowContext(ctx, d.Rebind("SELECT seq FROM "+OutboxTable+" WHERE publisher = ?"), "p").Scan(&seq); err != nil || seq != 1<<40 {
		t.Fatalf("read back seq %d, %v; want %d", seq, err, int64(1)<<40)
	}
}

func TestOpenDSNRefusesUnknownSchemes(t *testing.T) {
	for _, dsn := range []string{"mysql://x/y", "app.db", "sqlite://"} {
		if db, _, err := OpenDSN(dsn); err == nil {
			db.Close()
			t.Errorf("OpenDSN(%q) succeeded; want a refusal", dsn)
		}
	}
}

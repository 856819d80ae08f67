package txbox

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // registers the "sqlite" database/sql driver
)

// Dialect is the SQL flavour of the application's database. The outbox and
// inbox write the same statements to both, differing only in what Dialect
// says: placeholders and column types.
type Dialect int

const (
	// SQLite is SQLite through modernc.org/sqlite (driver name "sqlite").
	SQLite Dialect = iota + 1
	// Postgres is PostgreSQL through github.com/jackc/pgx/v5/stdlib
	// (driver name "pgx").
	Postgres
)

// String names the dialect as a DSN scheme does.
func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	}
	return "dialect(" + strconv.Itoa(int(d)) + ")"
}

// valid reports an unknown dialect as an error the caller can act on.
func (d Dialect) valid() error {
	if d == SQLite || d == Postgres {
		return nil
	}
	return fmt.Errorf("txbox: unknown dialect %d; use txbox.SQLite or txbox.Postgres", int(d))
}

// Placeholder is the n-th (1-based) bind parameter: "?" in SQLite, "$n" in
// PostgreSQL.
func (d Dialect) Placeholder(n int) string {
	if d == Postgres {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// Rebind rewrites a statement written with "?" placeholders into the
// dialect's own. Statements here never hold a literal "?", so a plain scan
// is enough.
func (d Dialect) Rebind(query string) string {
	if d != Postgres || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 8)
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// BigInt is the column type of a 64-bit integer (seqs, offsets).
func (d Dialect) BigInt() string {
	if d == Postgres {
		return "BIGINT"
	}
	return "INTEGER"
}

// Text is the column type of a string (ids, JSON rows).
func (d Dialect) Text() string { return "TEXT" }

// Bytes is the column type of a byte string.
func (d Dialect) Bytes() string {
	if d == Postgres {
		return "BYTEA"
	}
	return "BLOB"
}

// DriverName is the database/sql driver this package registers for d.
func (d Dialect) DriverName() string {
	if d == Postgres {
		return "pgx"
	}
	return "sqlite"
}

// The tables of the outbox. Names are fixed so that an application in
// another language can write to them from the documented DDL.
const (
	// OutboxTable holds committed rows waiting to be sent: (publisher, seq)
	// is the key, row the JSON object. A row is deleted once the broker
	// acknowledged it.
	OutboxTable = "streamcast_outbox"
	// OutboxSeqTable holds each publisher id's last assigned seq. Send takes
	// its row lock in the caller's transaction, which is what makes seqs
	// gapless and ordered like commits.
	OutboxSeqTable = "streamcast_outbox_seq"
	// OutboxStateTable is the sender's own: the stream id it is bound to,
	// the last wire seq the broker acknowledged, and how many rows went to
	// the dead-letter table (the wire seq of a row is its seq minus that).
	OutboxStateTable = "streamcast_outbox_state"
	// DeadLetterTable holds rows the stream's schema refused, with the
	// refusal, so none is silently dropped.
	DeadLetterTable = "streamcast_outbox_dead"
)

// DDL returns the statements that create every table of the outbox and the
// inbox, in order, each idempotent (IF NOT EXISTS). Run them yourself when
// the application's role has no DDL rights; otherwise NewOutbox and
// NewInbox create the tables when their options allow it.
func DDL(d Dialect) []string {
	return append(outboxDDL(d), inboxDDL(d)...)
}

func outboxDDL(d Dialect) []string {
	bi, tx := d.BigInt(), d.Text()
	return []string{
		"CREATE TABLE IF NOT EXISTS " + OutboxTable + " (" +
			"publisher " + tx + " NOT NULL, " +
			"seq " + bi + " NOT NULL, " +
			"row " + tx + " NOT NULL, " +
			"PRIMARY KEY (publisher, seq))",
		"CREATE TABLE IF NOT EXISTS " + OutboxSeqTable + " (" +
			"publisher " + tx + " PRIMARY KEY, " +
			"last_seq " + bi + " NOT NULL)",
		"CREATE TABLE IF NOT EXISTS " + OutboxStateTable + " (" +
			"publisher " + tx + " PRIMARY KEY, " +
			"stream_id " + tx + " NOT NULL DEFAULT '', " +
			"acked_seq " + bi + " NOT NULL DEFAULT 0, " +
			"dead " + bi + " NOT NULL DEFAULT 0)",
		"CREATE TABLE IF NOT EXISTS " + DeadLetterTable + " (" +
			"publisher " + tx + " NOT NULL, " +
			"seq " + bi + " NOT NULL, " +
			"row " + tx + " NOT NULL, " +
			"reason " + tx + " NOT NULL, " +
			"PRIMARY KEY (publisher, seq))",
	}
}

// CreateTables runs DDL(d) on db in one transaction (both dialects have
// transactional DDL), so a failure leaves no half-made schema.
func CreateTables(ctx context.Context, db *sql.DB, d Dialect) error {
	if err := d.valid(); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("txbox: create tables: %w", err)
	}
	defer tx.Rollback()
	for _, stmt := range DDL(d) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("txbox: create tables (%s): %w; a role without DDL rights needs an administrator to run txbox.DDL's statements once", firstWords(stmt, 6), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("txbox: create tables: %w", err)
	}
	return nil
}

// firstWords clips a statement for an error message.
func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = f[:n]
	}
	return strings.Join(f, " ")
}

// OpenDSN opens the database a command-line DSN names (ParseDSN reads it):
// sqlite:///abs/path.db, sqlite://relative/path.db, or a postgres:// (or
// postgresql://) URL, which pgx reads as it is. A SQLite file gets WAL and a
// busy timeout, so the application and a sender process can share it.
func OpenDSN(s string) (*sql.DB, Dialect, error) {
	tg, err := ParseDSN(s)
	if err != nil {
		return nil, 0, fmt.Errorf("txbox: %w", err)
	}
	d, name := SQLite, tg.Path
	if tg.Kind == Postgres {
		d, name = Postgres, Redact(s)
	}
	db, err := sql.Open(d.DriverName(), tg.Source)
	if err != nil {
		return nil, 0, fmt.Errorf("txbox: open %s: %w", name, err)
	}
	return db, d, nil
}

package txbox

import "strings"

// The tables of the inbox. Names are fixed, like the outbox's, so the DDL
// can be run by hand and the tables read from any language.
const (
	// InboxTable holds received rows not yet processed: (subscriber,
	// stream_offset) is the key, ts the server's commit stamp (µs, NULL when
	// the log predates stamps), row the JSON object as received. Next
	// deletes a row in the transaction it hands out.
	InboxTable = "streamcast_inbox"
	// InboxStateTable holds each subscriber's binding: the stream id it was
	// first connected to and the last offset it received. The offset moves
	// in the transaction that lands the rows (in InboxTable, or in the
	// table of `streamcast tail --into`), which is what makes receiving
	// exactly-once.
	InboxStateTable = "streamcast_inbox_state"
)

// inboxDDL returns the inbox's tables for DDL.
func inboxDDL(d Dialect) []string {
	bi, tx := d.BigInt(), d.Text()
	return []string{
		"CREATE TABLE IF NOT EXISTS " + InboxTable + " (" +
			"subscriber " + tx + " NOT NULL, " +
			"stream_offset " + bi + " NOT NULL, " +
			"ts " + bi + ", " +
			"row " + tx + " NOT NULL, " +
			"PRIMARY KEY (subscriber, stream_offset))",
		"CREATE TABLE IF NOT EXISTS " + InboxStateTable + " (" +
			"subscriber " + tx + " PRIMARY KEY, " +
			"stream_id " + tx + " NOT NULL, " +
			"last_offset " + bi + " NOT NULL)",
	}
}

// heldQuery counts a subscriber's unprocessed rows and their bytes (bytes
// of the JSON text, not characters: SQLite's length() counts characters).
func heldQuery(d Dialect) string {
	size := "length(CAST(row AS BLOB))"
	if d == Postgres {
		size = "octet_length(row)"
	}
	return d.Rebind("SELECT count(*), coalesce(sum(" + size + "), 0) FROM " + InboxTable + " WHERE subscriber = ?")
}

// takeQuery deletes a subscriber's oldest unprocessed row and returns it.
// PostgreSQL skips rows another worker's open transaction holds, so
// workers sharing a subscriber never wait on each other's rows; SQLite has
// one writer at a time anyway.
func takeQuery(d Dialect) string {
	lock := ""
	if d == Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	return d.Rebind("DELETE FROM " + InboxTable + " WHERE subscriber = ? AND stream_offset = (" +
		"SELECT stream_offset FROM " + InboxTable + " WHERE subscriber = ? ORDER BY stream_offset LIMIT 1" + lock +
		") RETURNING stream_offset, ts, row")
}

// quoteIdent quotes a table or column name for both dialects; a dotted
// table name (schema.table) is quoted part by part.
func quoteIdent(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	return strings.Join(parts, ".")
}

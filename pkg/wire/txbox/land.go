package txbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/streamcast/streamcast/pkg/wire"
)

// LandOptions configure Land. The zero value lands from the stream's
// frontier (or one above where the table was), reconnecting whenever the
// connection ends, until ctx ends.
type LandOptions struct {
	wire.DialOptions

	// Offset is where a new table starts (inclusive; 0 is the earliest
	// row); nil starts at the frontier. A table with saved state resumes
	// one above its last offset whatever Offset says (Started hears it),
	// so one call is safe to repeat forever.
	Offset *int64
	// Reset moves a table's saved state, the one explicit way back (or
	// forward): the landing starts at *Reset (inclusive; 0 is the earliest
	// row, wire.Null the frontier) whatever the state holds. The table's
	// rows above the new last offset are deleted in the transaction that
	// moves it, so they land again and the table still holds each row
	// once. On a new table it is an Offset.
	Reset *int64
	// Started, when set, hears once, before any row lands, where the
	// landing starts.
	Started func(LandStart)
	// UntilCaughtUp returns once every row below the frontier of the
	// first greeting has landed (at once when there is none).
	UntilCaughtUp bool
	// NoCreate leaves the tables alone (they must exist).
	NoCreate bool
	// Notice hears reconnects; nil discards.
	Notice func(msg string, keyvals ...any)
	// BatchRows is the most rows landed in one transaction (0:
	// DefaultInboxBatchRows); MinBackoff and MaxBackoff bound the wait between
	// reconnects.
	BatchRows              int
	MinBackoff, MaxBackoff time.Duration
}

// LandStart says where Land started.
type LandStart struct {
	Saved int64 // the table's last offset saved by an earlier run; wire.Null for a new table
	Last  int64 // its last offset now: the landing starts one above it
	Moved bool  // Reset moved it from Saved to Last
}

// LandResult says what Land did.
type LandResult struct {
	Rows int64 // rows landed by this call
	Last int64 // the table's last offset when Land returned; wire.Null when unknown
}

// LandSubscriber is the InboxStateTable key of a table Land fills.
func LandSubscriber(table string) string { return "table:" + table }

// Land receives the stream at url into table exactly once: one row per
// stream row, with its offset (OffsetColumn, the primary key), its commit
// stamp (TSColumn) and one column per schema column, typed by SQLType (or
// the whole row in RowColumn when the stream declares no schema). The
// table is created when missing. Each batch commits together with the
// table's last offset in InboxStateTable (key LandSubscriber(table)), so a
// process killed anywhere and run again leaves every row in the table
// once. The stream's identity is bound at the first run and checked at
// every later one.
//
// Land returns nil when ctx ends or, with UntilCaughtUp, when it has
// caught up; a refusal, a recreated stream or a database error ends it
// with an error.
func Land(ctx context.Context, db *sql.DB, d Dialect, url, table string, opts LandOptions) (LandResult, error) {
	res := LandResult{Last: wire.Null}
	if err := d.valid(); err != nil {
		return res, err
	}
	switch {
	case strings.TrimSpace(table) == "":
		return res, errors.New("txbox: no table named; give the table to land the stream in")
	case opts.Offset != nil && *opts.Offset < 0:
		return res, fmt.Errorf("txbox: Offset %d is negative; give 0 (the earliest row) or more", *opts.Offset)
	case opts.Reset != nil && *opts.Reset < 0 && *opts.Reset != wire.Null:
		return res, fmt.Errorf("txbox: Reset %d is negative; give 0 (the earliest row) or more, or wire.Null (the frontier)", *opts.Reset)
	case opts.BatchRows < 0, opts.MinBackoff < 0, opts.MaxBackoff < 0:
		return res, errors.New("txbox: BatchRows, MinBackoff and MaxBackoff take 0 (the default) or a positive value")
	}
	receiveDefaults(&opts.BatchRows, &opts.MinBackoff, &opts.MaxBackoff)
	if !opts.NoCreate {
		ddl := inboxDDL(d)[1]
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			se := stateError(StateCreate, "", err, "create "+InboxStateTable, "; a role without DDL rights needs it created once from DDL's statements")
			se.DDL = ddl
			return res, se
		}
	}
	land := &tableLanding{d: d, table: table}
	r := &receiver{
		db: db, d: d, url: url, subscriber: LandSubscriber(table), dial: opts.DialOptions, land: land,
		notice: opts.Notice, batchRows: opts.BatchRows, pollEvery: DefaultInboxPollEvery,
		minBackoff: opts.MinBackoff, maxBackoff: opts.MaxBackoff, stopAt: wire.Null,
		savedWins: true, reset: opts.Reset,
	}
	r.init()
	sub, err := r.open(ctx, opts.Offset)
	if err != nil {
		if ctx.Err() != nil {
			return res, nil
		}
		return res, err
	}
	res.Last = r.last.Load()
	sch, err := sub.Schema()
	if err != nil {
		sub.Close()
		return res, fmt.Errorf("txbox: the schema of %s: %w", url, err)
	}
	if sch != nil && !sch.IsAny() {
		land.cols.cols = sch.Columns()
	}
	if err := land.prepareTable(ctx, db, opts.NoCreate); err != nil {
		sub.Close()
		return res, err
	}
	start := LandStart{Saved: r.saved, Last: r.last.Load()}
	if opts.Reset != nil && r.saved != wire.Null {
		// The subscription starts at the reset; the state must say so
		// before a row lands, or commit would skip the rows below the
		// old position.
		last := sub.Resume() - 1
		if err := land.move(ctx, db, r.subscriber, r.streamID, last); err != nil {
			sub.Close()
			return res, err
		}
		r.last.Store(last)
		start.Last, start.Moved = last, true
		res.Last = last
	}
	if opts.Started != nil {
		opts.Started(start)
	}
	if opts.UntilCaughtUp {
		r.stopAt = sub.Greeting().EndOffset
	}
	r.run(ctx, sub)
	res.Rows, res.Last = r.landed.Load(), r.last.Load()
	if err := r.failure(); err != nil && !errors.Is(err, errDone) {
		return res, err
	}
	return res, nil
}

// tableLanding puts rows in a table of their own columns.
type tableLanding struct {
	d     Dialect
	table string
	cols  tableColumns
	ins   *rowInserter // made once the columns are known
}

// prepareTable creates the table (unless noCreate) and checks it has every
// column a row needs, so a mismatch is one clear error at the start rather
// than a failed insert later.
func (l *tableLanding) prepareTable(ctx context.Context, db *sql.DB, noCreate bool) error {
	if !noCreate {
		if _, err := db.ExecContext(ctx, l.cols.ddl(l.d, l.table)); err != nil {
			return fmt.Errorf("txbox: create table %s: %w", l.table, err)
		}
	}
	rows, err := db.QueryContext(ctx, "SELECT * FROM "+quoteIdent(l.table)+" WHERE 1 = 0")
	if err != nil {
		return fmt.Errorf("txbox: read the columns of table %s: %w", l.table, err)
	}
	have, err := rows.Columns()
	rows.Close()
	if err != nil {
		return fmt.Errorf("txbox: read the columns of table %s: %w", l.table, err)
	}
	var missing []string
	for _, n := range l.cols.names() {
		if !slices.Contains(have, n) {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("txbox: table %s lacks the columns %s that the stream's rows need; land the stream in a new table, or add the columns", l.table, strings.Join(missing, ", "))
	}
	l.ins = newRowInserter(l.d, l.table, l.cols.names(), func(dst []any, it item) []any {
		return append(append(dst, it.offset, nullTS(it.ts)), it.args...)
	})
	return nil
}

// move sets subscriber's last offset to last and deletes the table's rows
// above it, in one transaction: what Reset does to a table with state.
func (l *tableLanding) move(ctx context.Context, db *sql.DB, subscriber, streamID string, last int64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("txbox: begin moving table %s to offset %d: %w", l.table, last, err)
	}
	defer tx.Rollback()
	up, err := tx.ExecContext(ctx, l.d.Rebind("UPDATE "+InboxStateTable+" SET last_offset = ? WHERE subscriber = ? AND stream_id = ?"), last, subscriber, streamID)
	if err != nil {
		return stateError(StateWrite, subscriber, err, fmt.Sprintf("move table %s to offset %d", l.table, last), "")
	}
	if n, err := up.RowsAffected(); err == nil && n != 1 {
		return fmt.Errorf("txbox: table %s lost its saved position while it was being moved (another process reset or dropped it); run again", l.table)
	}
	if _, err := tx.ExecContext(ctx, l.d.Rebind("DELETE FROM "+quoteIdent(l.table)+" WHERE "+quoteIdent(OffsetColumn)+" > ?"), last); err != nil {
		return fmt.Errorf("txbox: delete the rows of table %s above offset %d: %w", l.table, last, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("txbox: commit moving table %s to offset %d: %w", l.table, last, err)
	}
	return nil
}

func (l *tableLanding) insert(ctx context.Context, tx *sql.Tx, items []item) error {
	return l.ins.insert(ctx, tx, items)
}

func (l *tableLanding) prepare(m *wire.Message) (item, error) {
	args, err := l.cols.values(m.Offset, m.Row)
	if err != nil {
		return item{}, err
	}
	return item{offset: m.Offset, ts: m.TS, row: nil, args: args}, nil
}

package txbox

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/streamcast/streamcast/pkg/wire"
)

// maxParams keeps a multi-row INSERT under both dialects' limits on bind
// parameters (SQLite 32766, PostgreSQL 65535).
const maxParams = 30000

// landChunk is the most rows one INSERT statement carries.
const landChunk = 32

// rowInserter lands items in a table with multi-row INSERTs. Full chunks
// share one statement prepared per transaction: SQLite parses a statement
// on every Exec, and a statement as long as a whole batch costs more to
// parse than its rows cost to insert. Used by the receiver's goroutine
// only.
type rowInserter struct {
	d     Dialect
	table string                         // as written in messages
	head  string                         // INSERT INTO t (cols) VALUES
	width int                            // columns per row
	args  func(dst []any, it item) []any // appends an item's values in column order
	stmts map[int]string                 // the INSERT of n rows, by n
}

func newRowInserter(d Dialect, table string, cols []string, args func(dst []any, it item) []any) *rowInserter {
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = quoteIdent(c)
	}
	return &rowInserter{
		d: d, table: table, width: len(cols), args: args, stmts: map[int]string{},
		head: "INSERT INTO " + quoteIdent(table) + " (" + strings.Join(quoted, ", ") + ") VALUES ",
	}
}

func (ri *rowInserter) statement(n int) string {
	if s, ok := ri.stmts[n]; ok {
		return s
	}
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", ri.width), ", ") + ")"
	var b strings.Builder
	b.WriteString(ri.head)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(one)
	}
	s := ri.d.Rebind(b.String())
	ri.stmts[n] = s
	return s
}

func (ri *rowInserter) insert(ctx context.Context, tx *sql.Tx, items []item) error {
	per := max(1, min(landChunk, maxParams/ri.width))
	var prepared *sql.Stmt
	defer func() {
		if prepared != nil {
			prepared.Close()
		}
	}()
	args := make([]any, 0, ri.width*per)
	for len(items) > 0 {
		chunk := items[:min(per, len(items))]
		items = items[len(chunk):]
		args = args[:0]
		for _, it := range chunk {
			args = ri.args(args, it)
		}
		var err error
		if len(chunk) == per {
			if prepared == nil {
				if prepared, err = tx.PrepareContext(ctx, ri.statement(per)); err != nil {
					return fmt.Errorf("txbox: prepare the insert into %s: %w", ri.table, err)
				}
			}
			_, err = prepared.ExecContext(ctx, args...)
		} else {
			_, err = tx.ExecContext(ctx, ri.statement(len(chunk)), args...)
		}
		if err != nil {
			return fmt.Errorf("txbox: land %d rows at offsets %d to %d in %s: %w", len(chunk), chunk[0].offset, chunk[len(chunk)-1].offset, ri.table, err)
		}
	}
	return nil
}

// nullTS is a commit stamp as a bind value: NULL when the log predates
// stamps.
func nullTS(ts int64) any {
	if ts == wire.Null {
		return nil
	}
	return ts
}

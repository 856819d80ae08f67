package sqlview

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"modernc.org/sqlite"

	"github.com/streamcast/streamcast/pkg/meta/history"
)

// Table is what log reads: one pinned cut of a stream's history. A
// *history.Reader is one; tests use Tables over Arrow records and Parquet
// files. Scan follows history.ScanRequest's contract: Columns is the
// projection (the Table may return more), Bounds only let it skip data
// whose statistics prove it holds no matching row, and rows come in offset
// order.
type Table interface {
	Schema() *arrow.Schema
	Scan(ctx context.Context, req history.ScanRequest) (array.RecordReader, error)
}

var _ Table = (*history.Reader)(nil)

// Options tune a View.
type Options struct {
	// NoPushDown decodes every column and passes no Bounds to Scan: the
	// same answers, slower. Tests compare it with push-down.
	NoPushDown bool
	// Filters are --filter terms: log shows only the rows every term
	// matches, and each term is a Bound on every Scan.
	Filters []Filter
}

// View is an in-memory SQLite database holding one table, log, over a
// Table. It runs one query at a time: close a query's Rows before the next
// Query.
type View struct {
	opts         Options
	filterBounds []history.Bound
	mod          *module
	db           *sql.DB
	conn         *sql.Conn
	drops        []string // what undoes the last Replace

	// mu guards what a query's callbacks read: they run on the goroutine
	// stepping the statement, which need not be the one that called
	// Query.
	mu      sync.Mutex
	table   Table
	cols    []column
	ctx     context.Context // the running query's
	query   string          // the running query
	collate bool            // the running query names a collation
	err     error           // the first error a scan met in the running query
}

// Open builds a View over t.
func Open(ctx context.Context, t Table, opts Options) (*View, error) {
	v := &View{opts: opts, ctx: context.Background()}
	v.mod = &module{v: v}
	d := &sqlite.Driver{}
	if err := d.RegisterModule(moduleName, v.mod); err != nil {
		return nil, fmt.Errorf("sqlview: %w", err)
	}
	v.db = sql.OpenDB(memoryConnector{d})
	// One connection: the in-memory database, and log in it, exist only
	// on the connection that made them.
	v.db.SetMaxOpenConns(1)
	conn, err := v.db.Conn(ctx)
	if err != nil {
		v.db.Close()
		return nil, fmt.Errorf("sqlview: open SQLite in memory: %w", err)
	}
	v.conn = conn
	if err := v.Replace(ctx, t); err != nil {
		v.Close()
		return nil, err
	}
	return v, nil
}

// memoryConnector opens private in-memory databases on one driver.
type memoryConnector struct{ d *sqlite.Driver }

func (c memoryConnector) Connect(context.Context) (driver.Conn, error) { return c.d.Open(":memory:") }

func (c memoryConnector) Driver() driver.Driver { return c.d }

// Replace points log at t, such as a newer cut of the same history (the
// live view re-pins its base this way). Its schema may differ from the
// last one's. No query may be running.
func (v *View) Replace(ctx context.Context, t Table) error {
	cols, err := columnsOf(t.Schema())
	if err != nil {
		return err
	}
	var bounds []history.Bound
	var where []string
	for _, f := range v.opts.Filters {
		b, w, err := f.resolve(cols)
		if err != nil {
			return err
		}
		bounds = append(bounds, b)
		where = append(where, w)
	}
	v.mu.Lock()
	v.table, v.cols, v.filterBounds = t, cols, bounds
	v.mu.Unlock()

	stmts := v.drops
	if len(where) == 0 {
		stmts = append(stmts, `CREATE VIRTUAL TABLE temp.log USING `+moduleName)
		v.drops = []string{`DROP TABLE temp.log`}
	} else {
		// The filters become a view's WHERE, so SQLite checks every row
		// against them exactly as it would the query's own WHERE; the
		// same terms, as Bounds, only prune.
		stmts = append(stmts,
			`CREATE VIRTUAL TABLE temp.log_unfiltered USING `+moduleName,
			`CREATE TEMP VIEW log AS SELECT * FROM temp.log_unfiltered WHERE `+strings.Join(where, " AND "))
		v.drops = []string{`DROP VIEW temp.log`, `DROP TABLE temp.log_unfiltered`}
	}
	for _, s := range stmts {
		if _, err := v.conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("sqlview: %s: %w", s, err)
		}
	}
	return nil
}

// Close closes the database. The View's Table is the caller's to close.
func (v *View) Close() error {
	var err error
	if v.conn != nil {
		err = v.conn.Close()
	}
	if v.db != nil {
		err = errors.Join(err, v.db.Close())
	}
	// The driver keeps registered modules for the life of the process;
	// dropping the View from its module lets the Table go.
	v.mod.v = nil
	v.mu.Lock()
	v.table = nil
	v.mu.Unlock()
	return err
}

// scanTarget is the Table and context a scan of the running query uses.
func (v *View) scanTarget() (Table, context.Context) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.table, v.ctx
}

func (v *View) collateInQuery() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.collate
}

// fail records the first error a scan met. SQLite reports a failed
// xNext without its message, so Query and Rows look here first.
func (v *View) fail(err error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err == nil {
		v.err = err
	}
	return err
}

// begin readies the View for a query.
func (v *View) begin(ctx context.Context, query string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.ctx, v.query, v.err = ctx, query, nil
	// A COLLATE anywhere in the query may change how text compares, and
	// the vtab API does not say which comparison it applies to; text
	// bounds are then not pushed at all.
	v.collate = strings.Contains(strings.ToUpper(query), "COLLATE")
}

// scanErr is the error a scan recorded during the running query, if any.
func (v *View) scanErr() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err
}

// Query runs one SQL statement over log.
func (v *View) Query(ctx context.Context, query string) (*Rows, error) {
	v.begin(ctx, query)
	rows, err := v.conn.QueryContext(ctx, query)
	if err != nil {
		return nil, v.queryError(ctx, query, err)
	}
	types, err := rows.ColumnTypes()
	if err != nil {
		rows.Close()
		return nil, v.queryError(ctx, query, err)
	}
	r := &Rows{v: v, ctx: ctx, query: query, rows: rows}
	for _, t := range types {
		r.cols = append(r.cols, ResultColumn{Name: t.Name(), DeclType: strings.ToUpper(t.DatabaseTypeName())})
	}
	r.vals = make([]any, len(types))
	r.ptrs = make([]any, len(types))
	for i := range r.vals {
		r.ptrs[i] = &r.vals[i]
	}
	return r, nil
}

// ResultColumn is one column of a query's result.
type ResultColumn struct {
	Name string
	// DeclType is the declared type of a column read straight from log
	// (INTEGER, REAL, TEXT, BLOB or DeclJSON), and "" for an expression.
	DeclType string
}

// Rows is a query's result, read row by row.
type Rows struct {
	v     *View
	ctx   context.Context
	query string
	rows  *sql.Rows
	cols  []ResultColumn
	vals  []any
	ptrs  []any
	err   error
}

// Columns describes the result's columns.
func (r *Rows) Columns() []ResultColumn { return r.cols }

// Next moves to the next row, reporting false at the end or on an error
// (see Err).
func (r *Rows) Next() bool {
	if r.err != nil || !r.rows.Next() {
		return false
	}
	if err := r.rows.Scan(r.ptrs...); err != nil {
		r.err = err
		return false
	}
	return true
}

// Values is the current row: int64, float64, string, []byte or nil per
// column. The slice is reused by the next call to Next.
func (r *Rows) Values() []any { return r.vals }

// Err is the error that ended Next early, if any.
func (r *Rows) Err() error {
	err := r.err
	if err == nil {
		err = r.rows.Err()
	}
	if err == nil {
		return nil
	}
	return r.v.queryError(r.ctx, r.query, err)
}

// Close ends the query.
func (r *Rows) Close() error { return r.rows.Close() }

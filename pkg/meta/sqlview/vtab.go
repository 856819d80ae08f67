package sqlview

import (
	"fmt"
	"slices"

	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"modernc.org/sqlite/vtab"

	"github.com/streamcast/streamcast/pkg/meta/history"
)

// moduleName is the SQLite module log is created with. Each View registers
// it on a driver of its own, so two Views never share it.
const moduleName = "streamcast_log"

// fullScanCost is BestIndex's estimate of a scan that prunes nothing; each
// pushed comparison halves it, so SQLite prefers plans that hand the
// table something to prune by.
const fullScanCost = 1e9

// module is the vtab.Module of one View.
type module struct{ v *View }

func (m *module) Create(ctx vtab.Context, _ []string) (vtab.Table, error) { return m.connect(ctx) }

func (m *module) Connect(ctx vtab.Context, _ []string) (vtab.Table, error) { return m.connect(ctx) }

func (m *module) connect(ctx vtab.Context) (vtab.Table, error) {
	v := m.v
	if err := ctx.Declare(createTable(v.cols)); err != nil {
		return nil, err
	}
	byName := make(map[string]int, len(v.cols))
	offsetCol := -1
	for i, c := range v.cols {
		byName[c.field.Name] = i
		if c.field.Name == columnOffset {
			offsetCol = i
		}
	}
	return &table{v: v, cols: v.cols, byName: byName, offsetCol: offsetCol, plans: map[string]*plan{}}, nil
}

// columnOffset is the system column rows are ordered by.
const columnOffset = "streamcast_offset"

// table is log on one SQLite connection.
type table struct {
	v         *View
	cols      []column
	byName    map[string]int
	offsetCol int              // the column of streamcast_offset
	plans     map[string]*plan // idxStr → parsed plan; SQLite reruns Filter per IN value
}

// BestIndex records the projection and the pushable comparisons in idxStr.
// It never sets Omit: SQLite checks every row the table returns, so a
// bound that prunes too little costs time, never a wrong answer.
func (t *table) BestIndex(info *vtab.IndexInfo) error {
	p := &plan{all: t.v.opts.NoPushDown}
	cost := fullScanCost
	if !p.all {
		p.used = usedColumns(info.ColUsed, len(t.cols))
		for i := range info.Constraints {
			c := &info.Constraints[i]
			if !c.Usable || c.Column < 0 || c.Column >= len(t.cols) || !t.cols[c.Column].kind.pushable() {
				continue
			}
			op, ok := opOf(c.Op)
			if !ok {
				continue
			}
			c.ArgIndex = len(p.terms)
			p.terms = append(p.terms, term{col: c.Column, op: op})
			cost /= 2
		}
		t.planOrder(p, info)
	}
	info.IdxStr = p.encode()
	info.EstimatedCost = cost
	info.EstimatedRows = int64(cost)
	return nil
}

// planOrder takes on the query's ORDER BY (or GROUP BY, which SQLite
// presents as one) when it is by plain columns: ORDER BY streamcast_offset
// is the order Scan returns rows in, and any other sortAll produces. A
// query that names a COLLATE is left to SQLite (see order.go).
func (t *table) planOrder(p *plan, info *vtab.IndexInfo) {
	ob := info.OrderBy
	if len(ob) == 0 || t.v.collateInQuery() {
		return
	}
	if len(ob) == 1 && ob[0].Column == t.offsetCol && !ob[0].Desc {
		info.OrderByConsumed = true
		return
	}
	for _, c := range info.Constraints {
		if c.Op == vtab.OpLIMIT && c.Usable {
			// ORDER BY … LIMIT: SQLite's sorter keeps only the rows
			// the limit lets through, where sortAll would hold the
			// whole scan.
			return
		}
	}
	for _, o := range ob {
		if o.Column < 0 || o.Column >= len(t.cols) {
			return // the rowid, or a column log does not have
		}
	}
	for _, o := range ob {
		p.order = append(p.order, orderTerm{col: o.Column, desc: o.Desc})
		if !slices.Contains(p.used, o.Column) {
			p.used = append(p.used, o.Column)
		}
	}
	info.OrderByConsumed = true
}

// usedColumns reads SQLite's colUsed mask: bit i for column i below 63,
// bit 63 for every column from 63 on.
func usedColumns(mask uint64, n int) []int {
	used := make([]int, 0, bits.OnesCount64(mask))
	for i := 0; i < n; i++ {
		bit := i
		if bit > 63 {
			bit = 63
		}
		if mask&(1<<uint(bit)) != 0 {
			used = append(used, i)
		}
	}
	return used
}

func (t *table) plan(idxStr string) (*plan, error) {
	if p, ok := t.plans[idxStr]; ok {
		return p, nil
	}
	p, err := decodePlan(idxStr, len(t.cols))
	if err != nil {
		return nil, err
	}
	t.plans[idxStr] = p
	return p, nil
}

func (t *table) Open() (vtab.Cursor, error) { return &cursor{t: t}, nil }

func (t *table) Disconnect() error { return nil }

func (t *table) Destroy() error { return nil }

// cursor walks the record batches of one Scan: in the order Scan returns
// them (offset order), or, when the plan consumed an ORDER BY, in the
// order sortAll put them.
type cursor struct {
	t   *table
	rr  array.RecordReader
	cur *batch // the batch of the current row
	i   int    // the current row in cur
	eof bool

	one batch // streaming: the one batch, rebound for each record

	sorted []*batch // ordered: every batch, retained
	perm   []rowRef // ordered: the rows in order
	pos    int      // ordered: the current row in perm
}

// batch is one record batch bound to log's columns.
type batch struct {
	rec  arrow.RecordBatch // ordered mode only: retained until release
	n    int
	get  []getter      // per column of log; nil when the batch lacks it (NULL)
	arrs []arrow.Array // per column of log, for IsNull
	off  *array.Int64  // the offsets: the rowids
}

// Filter starts a scan: the plan's columns, the View's filter bounds and a
// Bound per pushed comparison whose value means the same to the Table.
func (c *cursor) Filter(_ int, idxStr string, vals []vtab.Value) error {
	c.release()
	v := c.t.v
	p, err := c.t.plan(idxStr)
	if err != nil {
		return v.fail(err)
	}
	req := history.ScanRequest{}
	if !p.all {
		req.Columns = make([]string, 0, len(p.used))
		for _, i := range p.used {
			req.Columns = append(req.Columns, c.t.cols[i].field.Name)
		}
		if !slices.Contains(p.used, c.t.offsetCol) {
			// The offset is each row's rowid, which SQLite uses to
			// merge the scans of an OR whose arms each push their own
			// bounds; it is also what count(*) decodes, as rows must
			// still arrive when no column is used.
			req.Columns = append(req.Columns, columnOffset)
		}
		req.Bounds = append(req.Bounds, v.filterBounds...)
		collate := v.collateInQuery()
		for j, tm := range p.terms {
			if j >= len(vals) {
				break
			}
			if b, ok := boundOf(&c.t.cols[tm.col], tm.op, vals[j], collate); ok {
				req.Bounds = append(req.Bounds, b)
			}
		}
	}
	tbl, ctx := v.scanTarget()
	rr, err := tbl.Scan(ctx, req)
	if err != nil {
		return v.fail(err)
	}
	c.rr = rr
	c.eof = false
	if len(p.order) > 0 {
		return c.sortAll(p.order)
	}
	return c.advance()
}

// advance moves to the next batch that holds rows, or to the end.
func (c *cursor) advance() error {
	for c.rr.Next() {
		rec := c.rr.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		if err := c.t.bind(&c.one, rec); err != nil {
			return c.t.v.fail(err)
		}
		c.cur, c.i = &c.one, 0
		return nil
	}
	c.eof = true
	if err := c.rr.Err(); err != nil {
		return c.t.v.fail(err)
	}
	return nil
}

// bind builds the getters of a batch's columns, matched to log's by name.
// A column of log the batch lacks reads NULL: a log without the column
// (union by name, docs/design.md §7), or one the plan did not decode.
func (t *table) bind(b *batch, rec arrow.RecordBatch) error {
	if b.get == nil {
		b.get = make([]getter, len(t.cols))
		b.arrs = make([]arrow.Array, len(t.cols))
	}
	clear(b.get)
	clear(b.arrs)
	b.off, b.n = nil, int(rec.NumRows())
	for k, f := range rec.Schema().Fields() {
		i, ok := t.byName[f.Name]
		if !ok {
			continue
		}
		arr := rec.Column(k)
		g, err := getterFor(&t.cols[i], arr)
		if err != nil {
			return err
		}
		b.get[i], b.arrs[i] = g, arr
		if i == t.offsetCol {
			b.off, _ = arr.(*array.Int64)
		}
	}
	return nil
}

func (c *cursor) Next() error {
	if c.sorted != nil {
		c.pos++
		if c.pos >= len(c.perm) {
			c.eof = true
			return nil
		}
		r := c.perm[c.pos]
		c.cur, c.i = c.sorted[r.b], int(r.r)
		return nil
	}
	c.i++
	if c.i < c.cur.n {
		return nil
	}
	return c.advance()
}

func (c *cursor) Eof() bool { return c.eof || c.rr == nil }

func (c *cursor) Column(col int) (vtab.Value, error) {
	b := c.cur
	if b == nil || col < 0 || col >= len(b.get) || b.get[col] == nil || b.arrs[col].IsNull(c.i) {
		return nil, nil
	}
	return b.get[col](c.i), nil
}

// Rowid is the row's offset: unique across the stream, and the same in
// every scan, as SQLite needs when it merges scans by rowid.
func (c *cursor) Rowid() (int64, error) {
	if c.cur == nil || c.cur.off == nil || c.cur.off.IsNull(c.i) {
		return 0, c.t.v.fail(fmt.Errorf("sqlview: a row without %s at batch row %d; the Table must return it", columnOffset, c.i))
	}
	return c.cur.off.Value(c.i), nil
}

func (c *cursor) Close() error {
	c.release()
	return nil
}

func (c *cursor) release() {
	for _, b := range c.sorted {
		b.rec.Release()
	}
	c.sorted, c.perm, c.pos = nil, nil, 0
	if c.rr != nil {
		c.rr.Release()
		c.rr = nil
	}
	c.cur, c.i = nil, 0
}

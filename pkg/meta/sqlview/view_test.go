package sqlview

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/meta/history"
)

// TestPushDownNeverChangesResults runs random queries over random files
// twice, with push-down and without, and wants the same answer every time:
// bounds only skip files that cannot hold a matching row, and SQLite checks
// every row it is given. It also wants push-down to have skipped files,
// or the comparison proves nothing.
func TestPushDownNeverChangesResults(t *testing.T) {
	// 200 locally, as the issue asks at least; 2,000 at full count (5,000
	// took 89 s of CI's 30 minutes).
	cases := testkit.SoakCount(200, 2000)
	rng := rand.New(rand.NewPCG(13, 5))
	tbl := writeFiles(t, testSchema, randomHistory(rng, 16, 30))
	pushed := openView(t, tbl, Options{})
	plain := openView(t, tbl, Options{NoPushDown: true})
	pruned := 0
	for i := 0; i < cases; i++ {
		q := randomQuery(rng)
		tbl.reset()
		got := query(t, pushed, q)
		_, skipped := tbl.counts()
		if skipped > 0 {
			pruned++
		}
		want := query(t, plain, q)
		if !strings.Contains(q, "ORDER BY") {
			// Without ORDER BY the order is SQLite's choice, and differs
			// between plans (an IN list runs in value order): compare
			// the rows, not their order.
			got, want = sortLines(got), sortLines(want)
		}
		if got != want {
			t.Fatalf("case %d: %s\nwith push-down:\n%s\nwithout:\n%s", i, q, got, want)
		}
	}
	if pruned < cases/10 {
		t.Fatalf("push-down skipped files in only %d of %d queries", pruned, cases)
	}
	t.Logf("%d queries, %d of them skipped files", cases, pruned)
}

// TestBoundsSkipFiles shows pruning at work on each kind of comparison:
// the files whose statistics rule them out are never opened.
func TestBoundsSkipFiles(t *testing.T) {
	// 10 files of 100 rows; file k holds offsets [100k, 100k+100), sym
	// "s<k>" and qty k.
	var recs []arrow.RecordBatch
	sch := arrow.NewSchema([]arrow.Field{fOffset, fTS, fSym, fQty, fPrice}, nil)
	for k := 0; k < 10; k++ {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		for r := 0; r < 100; r++ {
			off := int64(100*k + r)
			b.Field(0).(*array.Int64Builder).Append(off)
			b.Field(1).(*array.Int64Builder).Append(1000 * off)
			b.Field(2).(*array.StringBuilder).Append("s" + string(rune('0'+k)))
			b.Field(3).(*array.Int64Builder).Append(int64(k))
			b.Field(4).(*array.Float64Builder).Append(float64(k) + 0.5)
		}
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	tbl := writeFiles(t, sch, recs)
	v := openView(t, tbl, Options{})
	for _, tc := range []struct {
		query         string
		want          string
		opened, scans int
	}{
		{"SELECT count(*) FROM log WHERE streamcast_offset >= 950", `{"count(*)":50}`, 1, 1},
		{"SELECT count(*) FROM log WHERE streamcast_offset < 100", `{"count(*)":100}`, 1, 1},
		{"SELECT count(*) FROM log WHERE streamcast_ts BETWEEN 250000 AND 349000", `{"count(*)":100}`, 2, 1},
		{"SELECT count(*) FROM log WHERE sym = 's3'", `{"count(*)":100}`, 1, 1},
		{"SELECT count(*) FROM log WHERE qty > 7.5", `{"count(*)":200}`, 2, 1},
		{"SELECT count(*) FROM log WHERE price <= 2", `{"count(*)":200}`, 2, 1},
		// IN runs one pruned scan per value.
		{"SELECT count(*) FROM log WHERE sym IN ('s1', 's8')", `{"count(*)":200}`, 2, 2},
		// A condition SQLite cannot hand the table prunes nothing.
		{"SELECT count(*) FROM log WHERE sym LIKE '%3'", `{"count(*)":100}`, 10, 1},
		{"SELECT count(*) FROM log WHERE streamcast_offset + 0 >= 950", `{"count(*)":50}`, 10, 1},
		// Neither does OR across columns.
		{"SELECT count(*) FROM log WHERE qty = 1 OR sym = 's2'", `{"count(*)":200}`, 10, 1},
	} {
		tbl.reset()
		if got := strings.TrimSpace(query(t, v, tc.query)); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.query, got, tc.want)
		}
		opened, skipped := tbl.counts()
		if opened != tc.opened || len(tbl.requests) != tc.scans || opened+skipped != 10*tc.scans {
			t.Errorf("%s: %d scans opened %d files and skipped %d; want %d scans opening %d", tc.query, len(tbl.requests), opened, skipped, tc.scans, tc.opened)
		}
	}
}

// TestProjectionDecodesOnlyUsedColumns checks the columns Scan is asked
// for are the ones the query uses.
func TestProjectionDecodesOnlyUsedColumns(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tbl := writeFiles(t, testSchema, randomHistory(rng, 3, 10))
	v := openView(t, tbl, Options{})
	for q, want := range map[string]string{
		"SELECT sym, sum(qty) FROM log GROUP BY sym": "sym,qty,streamcast_offset",
		"SELECT count(*) FROM log":                   "streamcast_offset",
		"SELECT price FROM log WHERE flag = 1":       "price,flag,streamcast_offset",
	} {
		tbl.reset()
		query(t, v, q)
		if got := strings.Join(tbl.requests[0].Columns, ","); got != want {
			t.Errorf("%s: Scan asked for %s, want %s", q, got, want)
		}
	}
	tbl.reset()
	query(t, openView(t, tbl, Options{NoPushDown: true}), "SELECT count(*) FROM log WHERE qty = 1")
	if r := tbl.requests[0]; r.Columns != nil || r.Bounds != nil {
		t.Errorf("NoPushDown asked for columns %v and bounds %v, want every column and no bounds", r.Columns, r.Bounds)
	}
}

// TestTypesMapToSQLite checks the documented mapping: integers INTEGER,
// floats REAL, strings TEXT, booleans 0/1, binary BLOB, and struct, list
// and map as JSON text that json_extract reads.
func TestTypesMapToSQLite(t *testing.T) {
	st := arrow.StructOf(arrow.Field{Name: "bid", Type: arrow.PrimitiveTypes.Float64}, arrow.Field{Name: "venue", Type: arrow.BinaryTypes.String, Nullable: true})
	mp := arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64)
	sch := arrow.NewSchema([]arrow.Field{
		fOffset,
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
		{Name: "s", Type: arrow.BinaryTypes.String},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "bin", Type: arrow.BinaryTypes.Binary},
		{Name: "st", Type: st},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
		{Name: "m", Type: mp},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	b.Field(0).(*array.Int64Builder).Append(7)
	b.Field(1).(*array.Int32Builder).Append(-3)
	b.Field(2).(*array.Float64Builder).Append(85565)
	b.Field(3).(*array.Float32Builder).Append(0.1)
	b.Field(4).(*array.StringBuilder).Append("héllo")
	b.Field(5).(*array.BooleanBuilder).Append(true)
	b.Field(6).(*array.BinaryBuilder).Append([]byte{0xde, 0xad})
	sb := b.Field(7).(*array.StructBuilder)
	sb.Append(true)
	sb.FieldBuilder(0).(*array.Float64Builder).Append(1.5)
	sb.FieldBuilder(1).(*array.StringBuilder).AppendNull()
	lb := b.Field(8).(*array.ListBuilder)
	lb.Append(true)
	lb.ValueBuilder().(*array.Int64Builder).AppendValues([]int64{4, 5}, nil)
	mb := b.Field(9).(*array.MapBuilder)
	mb.Append(true)
	mb.KeyBuilder().(*array.StringBuilder).Append("k")
	mb.ItemBuilder().(*array.Int64Builder).Append(9)
	b.Field(10).(*array.Int64Builder).AppendNull()
	rec := b.NewRecordBatch()
	b.Release()

	v := openView(t, writeFiles(t, sch, []arrow.RecordBatch{rec}), Options{})
	got := query(t, v, `SELECT typeof(i32), typeof(f64), typeof(f32), f32, typeof(s), b, typeof(b), hex(bin), typeof(bin),
		st, json_extract(st, '$.bid') AS bid, json_extract(l, '$[1]') AS l1, json_extract(m, '$.k') AS mk, typeof(l), n FROM log`)
	want := `{"typeof(i32)":"integer","typeof(f64)":"real","typeof(f32)":"real","f32":0.1,"typeof(s)":"text","b":1,"typeof(b)":"integer","hex(bin)":"DEAD","typeof(bin)":"blob","st":{"bid":1.5,"venue":null},"bid":1.5,"l1":5,"mk":9,"typeof(l)":"text","n":null}` + "\n"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestColumnsALogLacksReadNull reads across files that differ in their
// columns, as logs before and after a migration do.
func TestColumnsALogLacksReadNull(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	recs := randomHistory(rng, 6, 5)
	tbl := writeFiles(t, testSchema, recs)
	v := openView(t, tbl, Options{})
	// Files 0 and 1 lack price, files 4 and 5 lack qty.
	rows, err := v.Query(context.Background(), "SELECT streamcast_offset, price IS NULL, qty IS NULL FROM log ORDER BY streamcast_offset")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var off int64
	for i, r := range recs {
		for k := int64(0); k < r.NumRows(); k++ {
			if !rows.Next() {
				t.Fatalf("rows end at offset %d: %v", off, rows.Err())
			}
			vals := rows.Values()
			if vals[0].(int64) != off {
				t.Fatalf("row at offset %v, want %d", vals[0], off)
			}
			if i < 2 && vals[1].(int64) != 1 {
				t.Errorf("offset %d: price is not null in a file without the column", off)
			}
			if i >= 4 && vals[2].(int64) != 1 {
				t.Errorf("offset %d: qty is not null in a file without the column", off)
			}
			off++
		}
	}
	if rows.Next() {
		t.Fatalf("more rows than written")
	}
}

// TestQueryErrorsNameQueryAndPosition checks SQLite's refusals come back
// with the query and where in it SQLite stopped.
func TestQueryErrorsNameQueryAndPosition(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	v := openView(t, writeFiles(t, testSchema, randomHistory(rng, 1, 3)), Options{})
	for _, tc := range []struct {
		query, msg string
		line, col  int
	}{
		{"SELECT * FROM log WHERE WHERE sym = 'a'", `near "WHERE": syntax error`, 1, 25},
		{"SELECT sym FROM log\nWHERE sym = 'a' AND AND qty > 1", `near "AND": syntax error`, 2, 21},
		{"SELECT nope FROM log", `no such column: nope`, 1, 8},
		{"SELECT sym FROM log WHERE frob(sym)", `no such function: frob`, 1, 27},
		{"SELECT * FROM lgo", `no such table: lgo`, 1, 15},
		{"SELECT * FROM log WHERE (sym = 'a'", `incomplete input`, 1, 35},
	} {
		_, err := tryQuery(v, tc.query)
		var qe *QueryError
		if !errors.As(err, &qe) {
			t.Errorf("%q: got %v, want a *QueryError", tc.query, err)
			continue
		}
		if qe.Msg != tc.msg || qe.Line != tc.line || qe.Column != tc.col {
			t.Errorf("%q: got %q at %d:%d, want %q at %d:%d", tc.query, qe.Msg, qe.Line, qe.Column, tc.msg, tc.line, tc.col)
		}
		if !strings.Contains(err.Error(), "⟨here⟩") {
			t.Errorf("%q: the message does not mark the place: %v", tc.query, err)
		}
	}
}

// TestScanErrorsKeepTheirMessage checks a Table's error (a refusal, I6)
// reaches the caller intact, not as SQLite's bare "SQL logic error".
func TestScanErrorsKeepTheirMessage(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	tbl := writeFiles(t, testSchema, randomHistory(rng, 4, 30))
	tbl.failAt = 2
	v := openView(t, tbl, Options{})
	_, err := tryQuery(v, "SELECT * FROM log")
	if !errors.Is(err, errInjected) {
		t.Fatalf("got %v, want the Table's error", err)
	}
	// The View recovers: the next query runs clean.
	tbl.failAt = 0
	if _, err := tryQuery(v, "SELECT count(*) FROM log"); err != nil {
		t.Fatal(err)
	}
}

// TestFiltersPruneAndFilterRows checks --filter terms: rows outside them
// are gone from log, and their Bounds reach every Scan.
func TestFiltersPruneAndFilterRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	tbl := writeFiles(t, testSchema, randomHistory(rng, 12, 20))
	var filters []Filter
	for _, s := range []string{"streamcast_offset >= 40", "sym in (A, 'AA', \"b\")"} {
		f, err := ParseFilter(s)
		if err != nil {
			t.Fatal(err)
		}
		filters = append(filters, f)
	}
	v := openView(t, tbl, Options{Filters: filters})
	plain := openView(t, tbl, Options{NoPushDown: true})
	tbl.reset()
	got := query(t, v, "SELECT streamcast_offset, sym FROM log ORDER BY streamcast_offset")
	if _, skipped := tbl.counts(); skipped == 0 {
		t.Errorf("the filters skipped no file")
	}
	if bs := tbl.requests[0].Bounds; len(bs) < 2 || bs[1].Op != history.OpIn || len(bs[1].Values) != 3 {
		t.Errorf("Scan got bounds %v, want the filters' first", bs)
	}
	want := query(t, plain, "SELECT streamcast_offset, sym FROM log WHERE streamcast_offset >= 40 AND sym IN ('A', 'AA', 'b') ORDER BY streamcast_offset")
	if got != want || got == "" {
		t.Errorf("filtered rows differ:\n%s\nwant\n%s", got, want)
	}
}

func TestParseFilter(t *testing.T) {
	for _, tc := range []struct{ in, col, op, vals string }{
		{"sym = AAPL", "sym", "=", "AAPL"},
		{"qty>=10", "qty", ">=", "10"},
		{"price == 1.5", "price", "=", "1.5"},
		{"sym IN (A, 'B,C', \"D\")", "sym", "in", "A|'B,C'|\"D\""},
		{"sym in A,B", "sym", "in", "A|B"},
		{"note = a = b", "note", "=", "a = b"},
	} {
		f, err := ParseFilter(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if f.Column != tc.col || string(f.Op) != tc.op || strings.Join(f.Values, "|") != tc.vals {
			t.Errorf("%q: got %q %q %q", tc.in, f.Column, f.Op, f.Values)
		}
	}
	for _, in := range []string{"sym", "= 5", "sym <> 5", "sym in ()", "sym >"} {
		if _, err := ParseFilter(in); err == nil {
			t.Errorf("%q: parsed, want a refusal", in)
		}
	}
}

// TestReplaceRepinsTheTable checks a View can point log at a newer cut,
// with another schema, as the live view does on each refresh.
func TestReplaceRepinsTheTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	recs := randomHistory(rng, 6, 10)
	small := writeFiles(t, testSchema, recs[:3])
	v := openView(t, small, Options{})
	var n3, n6 int64
	for i, r := range recs {
		if i < 3 {
			n3 += r.NumRows()
		}
		n6 += r.NumRows()
	}
	if got := strings.TrimSpace(query(t, v, "SELECT count(*) AS n FROM log")); got != `{"n":`+itoa(n3)+`}` {
		t.Fatalf("got %s, want %d rows", got, n3)
	}
	big := writeFiles(t, arrow.NewSchema(append(testSchema.Fields(), arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), nil), recs)
	if err := v.Replace(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(query(t, v, "SELECT count(*) AS n, count(extra) AS e FROM log")); got != `{"n":`+itoa(n6)+`,"e":0}` {
		t.Fatalf("got %s, want %d rows", got, n6)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestCollateKeepsTextUnpruned checks a text comparison under a COLLATE
// is not pushed as a byte-wise bound: 'a' COLLATE NOCASE matches "A",
// which a bound of 'a' would prune away.
func TestCollateKeepsTextUnpruned(t *testing.T) {
	sch := arrow.NewSchema([]arrow.Field{fOffset, fSym}, nil)
	var recs []arrow.RecordBatch
	for k, sym := range []string{"A", "b"} {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		for r := 0; r < 10; r++ {
			b.Field(0).(*array.Int64Builder).Append(int64(10*k + r))
			b.Field(1).(*array.StringBuilder).Append(sym)
		}
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	v := openView(t, writeFiles(t, sch, recs), Options{})
	for _, q := range []string{
		"SELECT count(*) AS n FROM log WHERE sym = 'a' COLLATE NOCASE",
		"SELECT count(*) AS n FROM log WHERE sym COLLATE NOCASE = 'a'",
		"SELECT count(*) AS n FROM log WHERE sym COLLATE NOCASE IN ('a')",
		"SELECT count(*) AS n FROM log WHERE sym COLLATE NOCASE < 'B'",
	} {
		if got := strings.TrimSpace(query(t, v, q)); got != `{"n":10}` {
			t.Errorf("%s: got %s, want 10 rows", q, got)
		}
	}
}

func sortLines(s string) string {
	lines := strings.Split(s, "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestOrderIsTakenOnFromSQLite checks GROUP BY and ORDER BY on plain
// columns are returned in order by log, so SQLite's plan has no sorter
// (a TEMP B-TREE), and that a COLLATE leaves the sort to SQLite.
func TestOrderIsTakenOnFromSQLite(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	v := openView(t, writeFiles(t, testSchema, randomHistory(rng, 2, 5)), Options{})
	plain := openView(t, writeFiles(t, testSchema, randomHistory(rng, 2, 5)), Options{NoPushDown: true})
	for q, sorter := range map[string]bool{
		"SELECT sym, count(*) FROM log GROUP BY sym":                   false,
		"SELECT * FROM log ORDER BY qty DESC, streamcast_offset":       false,
		"SELECT * FROM log ORDER BY streamcast_offset":                 false,
		"SELECT DISTINCT sym FROM log ORDER BY sym":                    false,
		"SELECT * FROM log ORDER BY sym COLLATE NOCASE":                true,
		"SELECT sym COLLATE NOCASE AS s, count(*) FROM log GROUP BY s": true,
		"SELECT * FROM log ORDER BY qty + 1":                           true,
	} {
		plan := query(t, v, "EXPLAIN QUERY PLAN "+q)
		if got := strings.Contains(plan, "TEMP B-TREE"); got != sorter {
			t.Errorf("%s: SQLite sorts: %v, want %v\n%s", q, got, sorter, plan)
		}
		if !sorter && !strings.Contains(query(t, plain, "EXPLAIN QUERY PLAN "+q), "TEMP B-TREE") {
			t.Errorf("%s: without push-down SQLite does not sort either; the test shows nothing", q)
		}
	}
}

package sqlview

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The test history's columns: the system columns, then one of each kind.
// price is added by a "migration" a third of the way in and qty removed
// two thirds of the way in, so files differ in their columns as logs of a
// migrated stream do.
var (
	fOffset = arrow.Field{Name: "streamcast_offset", Type: arrow.PrimitiveTypes.Int64}
	fTS     = arrow.Field{Name: "streamcast_ts", Type: arrow.PrimitiveTypes.Int64}
	fSym    = arrow.Field{Name: "sym", Type: arrow.BinaryTypes.String, Nullable: true}
	fQty    = arrow.Field{Name: "qty", Type: arrow.PrimitiveTypes.Int64, Nullable: true}
	fPrice  = arrow.Field{Name: "price", Type: arrow.PrimitiveTypes.Float64, Nullable: true}
	fFlag   = arrow.Field{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true}
	fData   = arrow.Field{Name: "data", Type: arrow.BinaryTypes.Binary, Nullable: true}
	fTags   = arrow.Field{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true}
	fSmall  = arrow.Field{Name: "small", Type: arrow.PrimitiveTypes.Float32, Nullable: true}

	testSchema = arrow.NewSchema([]arrow.Field{fOffset, fTS, fSym, fQty, fPrice, fFlag, fData, fTags, fSmall}, nil)
)

var testSyms = []string{"A", "B", "C", "a", "b", "AA", "Ab"}

// randomHistory is nfiles files of up to maxRows rows each, in offset
// order. Each file keeps to a few symbols and a narrow range of qty and
// price, as data written over time does, so statistics can rule files out.
func randomHistory(rng *rand.Rand, nfiles, maxRows int) []arrow.RecordBatch {
	var recs []arrow.RecordBatch
	off := int64(0)
	for i := 0; i < nfiles; i++ {
		fields := []arrow.Field{fOffset, fTS, fSym}
		hasPrice, hasQty := i >= nfiles/3, i < 2*nfiles/3
		if hasQty {
			fields = append(fields, fQty)
		}
		if hasPrice {
			fields = append(fields, fPrice)
		}
		fields = append(fields, fFlag, fData, fTags, fSmall)
		b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
		n := rng.IntN(maxRows + 1)
		syms := []string{testSyms[rng.IntN(len(testSyms))], testSyms[rng.IntN(len(testSyms))]}
		qbase := int64(rng.IntN(40) - 20)
		pbase := float64(rng.IntN(40)) / 2
		for r := 0; r < n; r++ {
			k := 0
			next := func() array.Builder { k++; return b.Field(k - 1) }
			next().(*array.Int64Builder).Append(off)
			next().(*array.Int64Builder).Append(1_700_000_000_000_000 + off*1000 + int64(rng.IntN(999)))
			off++
			sb := next().(*array.StringBuilder)
			if rng.IntN(10) == 0 {
				sb.AppendNull()
			} else {
				sb.Append(syms[rng.IntN(2)])
			}
			if hasQty {
				qb := next().(*array.Int64Builder)
				if rng.IntN(8) == 0 {
					qb.AppendNull()
				} else {
					qb.Append(qbase + int64(rng.IntN(5)))
				}
			}
			if hasPrice {
				pb := next().(*array.Float64Builder)
				if rng.IntN(8) == 0 {
					pb.AppendNull()
				} else {
					pb.Append(pbase + float64(rng.IntN(8))/4)
				}
			}
			fb := next().(*array.BooleanBuilder)
			if rng.IntN(6) == 0 {
				fb.AppendNull()
			} else {
				fb.Append(rng.IntN(2) == 0)
			}
			db := next().(*array.BinaryBuilder)
			if rng.IntN(6) == 0 {
				db.AppendNull()
			} else {
				db.Append([]byte{byte(i), byte(rng.IntN(4))})
			}
			lb := next().(*array.ListBuilder)
			if rng.IntN(6) == 0 {
				lb.AppendNull()
			} else {
				lb.Append(true)
				vb := lb.ValueBuilder().(*array.StringBuilder)
				for j := rng.IntN(3); j > 0; j-- {
					vb.Append(testSyms[rng.IntN(len(testSyms))])
				}
			}
			f32 := next().(*array.Float32Builder)
			if rng.IntN(6) == 0 {
				f32.AppendNull()
			} else {
				f32.Append(float32(rng.IntN(10)) / 10)
			}
		}
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	return recs
}

// randomQuery is one SELECT over log with a random WHERE.
func randomQuery(rng *rand.Rand) string {
	cond := randomCond(rng, 2)
	switch rng.IntN(9) {
	case 5:
		return "SELECT sym, qty, price, streamcast_offset FROM log WHERE " + cond + " ORDER BY " + randomOrder(rng)
	case 6:
		dir := []string{"", " DESC"}
		return "SELECT DISTINCT sym, flag FROM log WHERE " + cond + " ORDER BY flag" + dir[rng.IntN(2)] + ", sym" + dir[rng.IntN(2)]
	case 7:
		cols := []string{"sym", "qty", "price", "flag", "data", "tags", "small", "sym, flag", "data, qty"}
		g := cols[rng.IntN(len(cols))]
		return "SELECT " + g + ", count(*), sum(qty) FROM log WHERE " + cond + " GROUP BY " + g
	case 8:
		return "SELECT qty, count(*) FROM log WHERE " + cond + " GROUP BY qty ORDER BY qty DESC LIMIT 3"

	case 0:
		cols := []string{"sym", "qty", "price", "flag", "data", "tags", "small", "streamcast_ts"}
		rng.Shuffle(len(cols), func(i, j int) { cols[i], cols[j] = cols[j], cols[i] })
		return fmt.Sprintf("SELECT streamcast_offset, %s FROM log WHERE %s ORDER BY streamcast_offset", strings.Join(cols[:1+rng.IntN(len(cols))], ", "), cond)
	case 1:
		return "SELECT count(*), sum(qty), total(price), min(sym), max(sym), sum(flag), min(data) FROM log WHERE " + cond
	case 2:
		return "SELECT sym, count(*), avg(price), max(qty) FROM log WHERE " + cond + " GROUP BY sym ORDER BY sym"
	case 3:
		return "SELECT json_extract(tags, '$[0]') AS t0, count(*) FROM log WHERE " + cond + " GROUP BY t0 ORDER BY t0"
	default:
		return "SELECT * FROM log WHERE " + cond
	}
}

// randomOrder is an ORDER BY list: plain columns, either direction,
// sometimes NULLS LAST or a COLLATE, and the offset last.
func randomOrder(rng *rand.Rand) string {
	cols := []string{"sym", "qty", "price", "flag", "streamcast_offset"}
	var terms []string
	for n := 1 + rng.IntN(2); n > 0; n-- {
		t := cols[rng.IntN(len(cols))]
		if t == "sym" && rng.IntN(5) == 0 {
			t += " COLLATE NOCASE"
		}
		if rng.IntN(2) == 0 {
			t += " DESC"
		}
		if rng.IntN(6) == 0 {
			t += " NULLS LAST"
		}
		terms = append(terms, t)
	}
	// The offset last breaks ties: rows with equal keys come in an order
	// SQL leaves open, which differs between plans (an IN list's scans
	// run one value after another).
	terms = append(terms, "streamcast_offset")
	return strings.Join(terms, ", ")
}

func randomCond(rng *rand.Rand, depth int) string {
	if depth > 0 && rng.IntN(3) == 0 {
		a, b := randomCond(rng, depth-1), randomCond(rng, depth-1)
		switch rng.IntN(3) {
		case 0:
			return "(" + a + " AND " + b + ")"
		case 1:
			return "(" + a + " OR " + b + ")"
		default:
			return "NOT (" + a + ")"
		}
	}
	cols := []string{"streamcast_offset", "streamcast_ts", "sym", "qty", "price", "flag", "data", "small"}
	col := cols[rng.IntN(len(cols))]
	if rng.IntN(12) == 0 {
		return col + " IS NULL"
	}
	if col == "sym" && rng.IntN(6) == 0 {
		col = "sym COLLATE NOCASE"
	}
	ops := []string{"=", "<", "<=", ">", ">=", "!=", "IN", "BETWEEN"}
	op := ops[rng.IntN(len(ops))]
	switch op {
	case "IN":
		vals := []string{randomConst(rng, col)}
		for j := rng.IntN(3); j > 0; j-- {
			vals = append(vals, randomConst(rng, col))
		}
		return col + " IN (" + strings.Join(vals, ", ") + ")"
	case "BETWEEN":
		return col + " BETWEEN " + randomConst(rng, col) + " AND " + randomConst(rng, col)
	}
	if rng.IntN(5) == 0 { // the constant first: SQLite turns it round
		mirror := map[string]string{"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
		return randomConst(rng, col) + " " + mirror[op] + " " + col
	}
	return col + " " + op + " " + randomConst(rng, col)
}

// randomConst is mostly a constant of the column's own type, sometimes
// one of another type (SQLite compares across types by its own rules, and
// push-down must not change the answer), sometimes NULL.
func randomConst(rng *rand.Rand, col string) string {
	kind := col
	if rng.IntN(6) == 0 {
		kind = []string{"qty", "price", "sym", "data", "null"}[rng.IntN(5)]
	}
	switch {
	case kind == "null":
		return "NULL"
	case kind == "streamcast_offset":
		return fmt.Sprint(rng.IntN(700) - 10)
	case kind == "streamcast_ts":
		return fmt.Sprint(1_700_000_000_000_000 + int64(rng.IntN(700_000)))
	case strings.HasPrefix(kind, "sym"):
		return "'" + testSyms[rng.IntN(len(testSyms))] + "'"
	case kind == "qty":
		if rng.IntN(3) == 0 {
			return fmt.Sprintf("%.1f", float64(rng.IntN(50)-25)+0.5)
		}
		return fmt.Sprint(rng.IntN(50) - 25)
	case kind == "price":
		if rng.IntN(3) == 0 {
			return fmt.Sprint(rng.IntN(25)) // an integer against a float column
		}
		return fmt.Sprintf("%g", float64(rng.IntN(100))/4)
	case kind == "flag":
		return fmt.Sprint(rng.IntN(2))
	case kind == "data":
		return fmt.Sprintf("X'%02x%02x'", rng.IntN(40), rng.IntN(4))
	case kind == "small":
		return fmt.Sprintf("%.1f", float64(rng.IntN(10))/10)
	}
	return "0"
}

// query runs q and renders its result as NDJSON.
func query(t testing.TB, v *View, q string) string {
	t.Helper()
	out, err := tryQuery(v, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

func tryQuery(v *View, q string) (string, error) {
	rows, err := v.Query(context.Background(), q)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b strings.Builder
	if _, err := Write(&b, rows, FormatNDJSON); err != nil {
		return "", err
	}
	return b.String(), nil
}

func openView(t testing.TB, tbl Table, opts Options) *View {
	t.Helper()
	v, err := Open(context.Background(), tbl, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

package sqlview

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"modernc.org/sqlite/vtab"

	"github.com/streamcast/streamcast/pkg/meta/history"
)

// plan is what BestIndex chose and Filter carries out: the columns to
// decode, the comparisons whose right-hand values arrive in Filter's
// argument list (in that order), and the order to return rows in. It travels through SQLite as idxStr.
type plan struct {
	all   bool        // decode every column (no projection)
	used  []int       // the columns to decode, when !all
	terms []term      // one per Filter argument
	order []orderTerm // the order to return rows in; none: offset order
}

// term is one pushed comparison: column Col Op the Filter argument.
type term struct {
	col int
	op  history.Op
}

// opOf maps SQLite's constraint operators to the Bounds history takes.
// IN reaches a virtual table as = once per value: SQLite runs Filter for
// each value of the list, and each run is pruned by that value.
func opOf(op vtab.ConstraintOp) (history.Op, bool) {
	switch op {
	case vtab.OpEQ:
		return history.OpEq, true
	case vtab.OpLT:
		return history.OpLt, true
	case vtab.OpLE:
		return history.OpLe, true
	case vtab.OpGT:
		return history.OpGt, true
	case vtab.OpGE:
		return history.OpGe, true
	}
	return "", false
}

// encode writes p as idxStr: "*" or the used columns, ";", the terms,
// ";" and the order, such as "0,3,5;3=,0>=;3a,5d".
func (p *plan) encode() string {
	var b strings.Builder
	if p.all {
		b.WriteByte('*')
	} else {
		for i, c := range p.used {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(c))
		}
	}
	b.WriteByte(';')
	for i, t := range p.terms {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(t.col))
		b.WriteString(string(t.op))
	}
	b.WriteByte(';')
	for i, o := range p.order {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(o.col))
		if o.desc {
			b.WriteByte('d')
		} else {
			b.WriteByte('a')
		}
	}
	return b.String()
}

// decodePlan reads an idxStr written by encode; ncols bounds the column
// numbers it may name.
func decodePlan(s string, ncols int) (*plan, error) {
	bad := func() (*plan, error) { return nil, fmt.Errorf("sqlview: bad plan %q", s) }
	parts := strings.Split(s, ";")
	if len(parts) != 3 {
		return bad()
	}
	cols, terms, order := parts[0], parts[1], parts[2]
	p := &plan{}
	switch cols {
	case "*":
		p.all = true
	case "":
	default:
		for _, f := range strings.Split(cols, ",") {
			c, err := strconv.Atoi(f)
			if err != nil || c < 0 || c >= ncols {
				return bad()
			}
			p.used = append(p.used, c)
		}
	}
	if order != "" {
		for _, f := range strings.Split(order, ",") {
			if len(f) < 2 || (f[len(f)-1] != 'a' && f[len(f)-1] != 'd') {
				return bad()
			}
			c, err := strconv.Atoi(f[:len(f)-1])
			if err != nil || c < 0 || c >= ncols {
				return bad()
			}
			p.order = append(p.order, orderTerm{col: c, desc: f[len(f)-1] == 'd'})
		}
	}
	if terms == "" {
		return p, nil
	}
	for _, f := range strings.Split(terms, ",") {
		i := strings.IndexAny(f, "=<>")
		if i <= 0 {
			return bad()
		}
		c, err := strconv.Atoi(f[:i])
		if err != nil || c < 0 || c >= ncols {
			return bad()
		}
		op := history.Op(f[i:])
		switch op {
		case history.OpEq, history.OpLt, history.OpLe, history.OpGt, history.OpGe:
		default:
			return bad()
		}
		p.terms = append(p.terms, term{col: c, op: op})
	}
	return p, nil
}

// pushable reports whether comparisons on a column of kind k can become
// Bounds at all. float32 columns read as their shortest decimal, which
// differs from the float32 the statistics hold, so a bound could prove a
// file empty that holds a matching row; JSON and boolean columns have no
// statistics worth the risk.
func (k kind) pushable() bool {
	switch k {
	case kindInt, kindFloat, kindText, kindBlob:
		return true
	}
	return false
}

// boundOf turns "column op v", v being the value SQLite passed for the
// comparison, into a Bound with the same meaning under SQLite's rules, or
// reports false when it cannot say so exactly. Dropping a bound only costs
// pruning; a wrong one would change results, so every case that is not
// plainly the same comparison is dropped: a value of another storage class
// (SQLite's affinity rules could convert it), NULL (matches nothing, but
// that is SQLite's to decide), a text comparison under a COLLATE, and an
// integer that a float cannot hold exactly.
func boundOf(c *column, op history.Op, v vtab.Value, collate bool) (history.Bound, bool) {
	b := history.Bound{Column: c.field.Name, Op: op}
	switch c.kind {
	case kindInt:
		switch x := v.(type) {
		case int64:
			b.Values = []any{x}
			return b, true
		case float64:
			return intBound(b, x)
		}
	case kindFloat:
		switch x := v.(type) {
		case float64:
			b.Values = []any{x}
			return b, true
		case int64:
			f := float64(x)
			if f < -(1<<63) || f >= 1<<63 || int64(f) != x {
				return b, false
			}
			b.Values = []any{f}
			return b, true
		}
	case kindText:
		if x, ok := v.(string); ok && !collate {
			b.Values = []any{x}
			return b, true
		}
	case kindBlob:
		if x, ok := v.([]byte); ok {
			b.Values = []any{append([]byte(nil), x...)}
			return b, true
		}
	}
	return b, false
}

// intBound is an integer column compared with a float: col op f, as an
// integer comparison when one means the same.
func intBound(b history.Bound, f float64) (history.Bound, bool) {
	if math.IsNaN(f) || f < -(1<<63) || f >= 1<<63 {
		return b, false
	}
	if f == math.Trunc(f) {
		b.Values = []any{int64(f)}
		return b, true
	}
	switch b.Op {
	case history.OpGt, history.OpGe: // col > 2.5 ⇔ col >= 3
		b.Op, b.Values = history.OpGe, []any{int64(math.Ceil(f))}
		return b, true
	case history.OpLt, history.OpLe: // col < 2.5 ⇔ col <= 2
		b.Op, b.Values = history.OpLe, []any{int64(math.Floor(f))}
		return b, true
	}
	return b, false // col = 2.5 matches nothing; SQLite will find that out itself
}

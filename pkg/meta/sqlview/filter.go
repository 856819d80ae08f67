package sqlview

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/streamcast/streamcast/pkg/meta/history"
)

// Filter is one --filter term, "column op value": op is =, <, <=, >, >=
// or in, with in taking a comma-separated list, in parentheses or not.
// A value is a number, or text: bare, or quoted with ' or " (JSON rules
// for ").
type Filter struct {
	Column string
	Op     history.Op
	Values []string
	text   string
}

// String is the term as given.
func (f Filter) String() string { return f.text }

// ParseFilter reads one --filter term such as "symbol = AAPL",
// "streamcast_offset >= 1000" or "symbol in (AAPL, MSFT)".
func ParseFilter(s string) (Filter, error) {
	f := Filter{text: s}
	bad := func(why string) (Filter, error) {
		return Filter{}, fmt.Errorf("--filter %q: %s; a filter is 'column op value' with op one of =, <, <=, >, >=, in (such as 'symbol = AAPL' or 'symbol in (AAPL, MSFT)')", s, why)
	}
	col, op, rest, ok := splitOp(s)
	if !ok {
		return bad("no comparison found")
	}
	f.Column, f.Op = strings.TrimSpace(col), op
	if f.Column == "" {
		return bad("no column before " + string(op))
	}
	if unq, err := unquote(f.Column); err == nil {
		f.Column = unq
	}
	rest = strings.TrimSpace(rest)
	if op == history.OpIn {
		if strings.HasPrefix(rest, "(") && strings.HasSuffix(rest, ")") {
			rest = rest[1 : len(rest)-1]
		}
		for _, v := range splitList(rest) {
			if v = strings.TrimSpace(v); v == "" {
				return bad("an empty value in the list")
			}
			f.Values = append(f.Values, v)
		}
	} else if rest != "" {
		f.Values = []string{rest}
	}
	if len(f.Values) == 0 {
		return bad("no value after " + string(op))
	}
	return f, nil
}

// splitOp finds the first comparison in s.
func splitOp(s string) (col string, op history.Op, rest string, ok bool) {
	low := strings.ToLower(s)
	if i := strings.Index(low, " in "); i >= 0 && !strings.ContainsAny(s[:i], "=<>") {
		return s[:i], history.OpIn, s[i+4:], true
	}
	if i := strings.Index(low, " in("); i >= 0 && !strings.ContainsAny(s[:i], "=<>") {
		return s[:i], history.OpIn, s[i+3:], true
	}
	i := strings.IndexAny(s, "=<>")
	if i < 0 {
		return "", "", "", false
	}
	switch {
	case strings.HasPrefix(s[i:], "<="):
		return s[:i], history.OpLe, s[i+2:], true
	case strings.HasPrefix(s[i:], ">="):
		return s[:i], history.OpGe, s[i+2:], true
	case strings.HasPrefix(s[i:], "=="):
		return s[:i], history.OpEq, s[i+2:], true
	case s[i] == '=':
		return s[:i], history.OpEq, s[i+1:], true
	case s[i] == '<':
		if strings.HasPrefix(s[i:], "<>") {
			return "", "", "", false
		}
		return s[:i], history.OpLt, s[i+1:], true
	default:
		return s[:i], history.OpGt, s[i+1:], true
	}
}

// splitList splits on commas outside quotes.
func splitList(s string) []string {
	var out []string
	var quote byte
	start := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == ',':
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// unquote reads a '…' or "…" value; an unquoted one is an error.
func unquote(v string) (string, error) {
	switch {
	case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
		return strings.ReplaceAll(v[1:len(v)-1], "''", "'"), nil
	case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
		var s string
		err := json.Unmarshal([]byte(v), &s)
		return s, err
	}
	return "", fmt.Errorf("not quoted")
}

// resolve checks f against log's columns and returns its Bound and the
// SQL condition that applies it to rows.
func (f Filter) resolve(cols []column) (history.Bound, string, error) {
	var c *column
	for i := range cols {
		if cols[i].field.Name == f.Column {
			c = &cols[i]
		}
	}
	if c == nil {
		for i := range cols {
			if strings.EqualFold(cols[i].field.Name, f.Column) {
				c = &cols[i]
			}
		}
	}
	if c == nil {
		names := make([]string, len(cols))
		for i := range cols {
			names[i] = cols[i].field.Name
		}
		return history.Bound{}, "", fmt.Errorf("--filter %q: the stream has no column %q (it has %s)", f.text, f.Column, strings.Join(names, ", "))
	}
	b := history.Bound{Column: c.field.Name, Op: f.Op}
	lits := make([]string, 0, len(f.Values))
	for _, raw := range f.Values {
		val, lit, err := filterValue(c, raw)
		if err != nil {
			return history.Bound{}, "", fmt.Errorf("--filter %q: %w", f.text, err)
		}
		b.Values = append(b.Values, val)
		lits = append(lits, lit)
	}
	cond := quoteIdent(c.field.Name) + " "
	if f.Op == history.OpIn {
		cond += "IN (" + strings.Join(lits, ", ") + ")"
	} else {
		cond += string(f.Op) + " " + lits[0]
	}
	return b, cond, nil
}

// filterValue reads one value for column c: the Bound's value and its SQL
// literal.
func filterValue(c *column, raw string) (any, string, error) {
	name := c.field.Name
	switch c.kind {
	case kindInt:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return nil, "", fmt.Errorf("%s is an integer column, and %s is not an integer", name, raw)
		}
		return n, strconv.FormatInt(n, 10), nil
	case kindFloat:
		x, err := strconv.ParseFloat(raw, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, "", fmt.Errorf("%s is a float column, and %s is not a finite number", name, raw)
		}
		lit := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(lit, ".e") {
			lit += ".0"
		}
		return x, lit, nil
	case kindText:
		s := raw
		if unq, err := unquote(raw); err == nil {
			s = unq
		} else if raw[0] == '"' || raw[0] == '\'' {
			return nil, "", fmt.Errorf("the value %s has an unclosed quote", raw)
		}
		return s, "'" + strings.ReplaceAll(s, "'", "''") + "'", nil
	}
	return nil, "", fmt.Errorf("%s is a %s column; --filter compares integer, float and string columns, so put this condition in the query's WHERE", name, c.field.Type)
}

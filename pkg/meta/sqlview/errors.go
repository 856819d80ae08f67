package sqlview

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// QueryError is a query SQLite refused or failed to run: its message, the
// query, and where in it SQLite stopped, when SQLite says.
type QueryError struct {
	Query string
	// Pos is the byte offset in Query that the message points at, or -1
	// when it points nowhere in particular.
	Pos int
	// Line and Column are Pos as 1-based line and column (in characters).
	Line, Column int
	Msg          string
}

// Error gives the message, the position, and the query around it.
func (e *QueryError) Error() string {
	if e.Pos < 0 {
		return fmt.Sprintf("%s, in the query %s", e.Msg, quoteQuery(e.Query))
	}
	return fmt.Sprintf("%s, at line %d column %d of the query: %s", e.Msg, e.Line, e.Column, around(e.Query, e.Pos))
}

// quoteQuery quotes a query for a message, on one line and cut to a
// readable length.
func quoteQuery(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if utf8.RuneCountInString(q) > 120 {
		r := []rune(q)
		q = string(r[:117]) + "..."
	}
	return fmt.Sprintf("%q", q)
}

// around quotes the query with a marker at pos: "SELECT * FROM log ⟨here⟩FORM x".
func around(q string, pos int) string {
	const span = 40
	start, end := pos-span, pos+span
	pre, post := "", ""
	if start <= 0 {
		start = 0
	} else {
		pre = "..."
	}
	if end >= len(q) {
		end = len(q)
	} else {
		post = "..."
	}
	for start > 0 && !utf8.RuneStart(q[start]) {
		start--
	}
	for end < len(q) && !utf8.RuneStart(q[end]) {
		end++
	}
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	before, after := flat(q[start:pos]), flat(q[pos:end])
	if pos > start && isSpace(q[pos-1]) {
		before += " "
	}
	return fmt.Sprintf("%q", pre+before+"⟨here⟩"+after+post)
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// sqliteMsg strips the driver's wrapping from a SQLite error:
// "SQL logic error: no such column: x (1)" → "no such column: x".
var sqliteMsg = regexp.MustCompile(`^(?:SQL logic error|[a-zA-Z ]+ error|[a-z ]+): (.*) \(\d+\)$`)

var (
	nearToken   = regexp.MustCompile(`^near "((?:[^"]|"")*)": syntax error$`)
	noSuchThing = regexp.MustCompile(`^no such (column|table|function): (.+)$`)
)

// queryError turns an error from running query into what the caller
// sees: the error a scan recorded when there is one (a refusal from the
// Table, I6, keeps its type for errors.Is/As), the context's error when it
// ended the query, and otherwise a *QueryError locating SQLite's message.
func (v *View) queryError(ctx context.Context, query string, err error) error {
	if serr := v.scanErr(); serr != nil {
		return fmt.Errorf("query %s: %w", quoteQuery(query), serr)
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("query %s: %w", quoteQuery(query), cerr)
	}
	msg := err.Error()
	if m := sqliteMsg.FindStringSubmatch(msg); m != nil {
		msg = m[1]
	}
	e := &QueryError{Query: query, Pos: v.locate(ctx, query, msg), Msg: msg}
	if e.Pos >= 0 {
		e.Line = 1 + strings.Count(query[:e.Pos], "\n")
		e.Column = 1 + utf8.RuneCountInString(query[strings.LastIndexByte(query[:e.Pos], '\n')+1:e.Pos])
	}
	return e
}

// locate finds where in query SQLite's message points, or -1. SQLite knows
// the offset (sqlite3_error_offset) but the driver does not pass it on, so
// a syntax error is found by preparing the prefixes that end at each place
// the token occurs until one fails with the same message, and a missing
// column, table or function by its name.
func (v *View) locate(ctx context.Context, query, msg string) int {
	if m := nearToken.FindStringSubmatch(msg); m != nil {
		tok := strings.ReplaceAll(m[1], `""`, `"`)
		for from := 0; ; {
			i := strings.Index(query[from:], tok)
			if i < 0 {
				break
			}
			i += from
			if stmt, err := v.conn.PrepareContext(ctx, query[:i+len(tok)]); err == nil {
				stmt.Close()
			} else if strings.Contains(err.Error(), msg) {
				return i
			}
			from = i + 1
		}
		return -1
	}
	if msg == "incomplete input" {
		return len(strings.TrimRight(query, " \t\r\n;"))
	}
	if m := noSuchThing.FindStringSubmatch(msg); m != nil {
		name := m[2]
		if j := strings.LastIndexByte(name, '.'); j >= 0 && m[1] != "function" {
			name = name[j+1:]
		}
		return findWord(query, name)
	}
	return -1
}

// findWord is the offset of the first whole-word, case-insensitive
// occurrence of name in query, or -1.
func findWord(query, name string) int {
	lq, ln := strings.ToLower(query), strings.ToLower(name)
	word := func(b byte) bool {
		return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 0x80
	}
	for from := 0; ; {
		i := strings.Index(lq[from:], ln)
		if i < 0 {
			return -1
		}
		i += from
		j := i + len(ln)
		if (i == 0 || !word(lq[i-1])) && (j == len(lq) || !word(lq[j])) {
			return i
		}
		from = i + 1
	}
}

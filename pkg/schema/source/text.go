package source

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamcast/streamcast/pkg/schema"
)

// maxLineBytes bounds one NDJSON line, so a file without newlines cannot
// take the memory.
const maxLineBytes = 64 << 20

// rowBuilder turns canonical rows into a batch of the declared columns.
type rowBuilder struct {
	sch *schema.Schema
	sc  *arrow.Schema
	rb  *array.RecordBuilder
	any *array.StringBuilder // the row column of a stream without a schema
	n   int
}

// anyRowSchema is the one column of a stream without a schema: each row's
// JSON text (logstore's streamcast_row).
var anyRowSchema = arrow.NewSchema([]arrow.Field{{Name: "streamcast_row", Type: arrow.BinaryTypes.String}}, nil)

func newRowBuilder(sch *schema.Schema) *rowBuilder {
	b := &rowBuilder{sch: sch, sc: sch.Arrow()}
	if sch.IsAny() {
		b.sc = anyRowSchema
	}
	b.rb = array.NewRecordBuilder(memory.DefaultAllocator, b.sc)
	if sch.IsAny() {
		b.any = b.rb.Field(0).(*array.StringBuilder)
	}
	return b
}

func (b *rowBuilder) add(canonical []byte) error {
	b.n++
	if b.any != nil {
		b.any.BinaryBuilder.Append(canonical)
		return nil
	}
	return b.sch.AppendArrow(b.rb.Fields(), canonical)
}

// batch returns the rows added since the last batch.
func (b *rowBuilder) batch() arrow.RecordBatch {
	b.n = 0
	return b.rb.NewRecordBatch()
}

// reset drops the rows added since the last batch (a refused batch).
func (b *rowBuilder) reset() {
	rec := b.rb.NewRecordBatch()
	rec.Release()
	b.n = 0
}

func (b *rowBuilder) release() { b.rb.Release() }

// ndjsonReader reads one JSON object per line; blank lines are no rows.
type ndjsonReader struct {
	br    *bufio.Reader
	c     io.Closer
	b     *rowBuilder
	dec   schema.Row
	rows  int64 // rows read or skipped
	lines int64 // lines read
	batch int
	long  []byte
}

func openNDJSON(sch *schema.Schema, rs readSource, batch int) (batchReader, error) {
	return &ndjsonReader{br: bufio.NewReaderSize(rs.r, 1<<20), c: rs.c, b: newRowBuilder(sch), batch: batch}, nil
}

// readLine returns the next line without its newline, or io.EOF.
func (r *ndjsonReader) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		r.long = append(r.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(r.long) > maxLineBytes {
				return nil, &RefusedError{Location: Location{Row: r.rows + 1, Line: r.lines + 1}, Problem: fmt.Sprintf("the line is longer than %d MiB", maxLineBytes>>20)}
			}
			line, err = r.br.ReadSlice('\n')
			r.long = append(r.long, line...)
		}
		line = r.long
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(line) == 0 && errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	r.lines++
	return bytes.TrimSuffix(bytes.TrimSuffix(line, []byte{'\n'}), []byte{'\r'}), nil
}

func blank(line []byte) bool { return len(bytes.TrimSpace(line)) == 0 }

func (r *ndjsonReader) next(ctx context.Context) (arrow.RecordBatch, error) {
	for r.b.n < r.batch {
		line, err := r.readLine()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.b.reset()
			return nil, err
		}
		if blank(line) {
			continue
		}
		if err := r.b.sch.Decode(&r.dec, line); err != nil {
			row := r.rows + int64(r.b.n) + 1
			r.b.reset()
			return nil, refusal(err, Location{Row: row, Line: r.lines})
		}
		if err := r.b.add(r.dec.Canonical); err != nil {
			r.b.reset()
			return nil, fmt.Errorf("line %d: %w", r.lines, err)
		}
	}
	if r.b.n == 0 {
		return nil, io.EOF
	}
	r.rows += int64(r.b.n)
	return r.b.batch(), nil
}

// refusal turns a schema refusal into one with a place.
func refusal(err error, at Location) error {
	var re *schema.RowError
	if errors.As(err, &re) {
		return &RefusedError{Location: at, Column: re.Path, Problem: re.Problem}
	}
	return &RefusedError{Location: at, Problem: err.Error()}
}

func (r *ndjsonReader) skip(n int64) (int64, error) {
	var done int64
	for done < n {
		line, err := r.readLine()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return done, err
		}
		if !blank(line) {
			done++
		}
	}
	r.rows += done
	return done, nil
}

func (r *ndjsonReader) row() int64  { return r.rows }
func (r *ndjsonReader) line() int64 { return r.lines + 1 }
func (r *ndjsonReader) close() error {
	r.b.release()
	if r.c != nil {
		return r.c.Close()
	}
	return nil
}

// csvReader reads CSV with a header row; each cell is read by its
// column's declared type and the row then checked by schema.Decode.
type csvReader struct {
	cr       *csv.Reader
	c        io.Closer
	b        *rowBuilder
	dec      schema.Row
	cols     []csvCol // per header field
	rows     int64
	batch    int
	js       []byte
	nextLine int64 // line of the next record's start
}

// csvCol is one header field's column.
type csvCol struct {
	name     string
	key      []byte // `"name":`
	kind     cellKind
	nullable bool
}

type cellKind uint8

const (
	cellString cellKind = iota // JSON string: text, and binary text (the decoder checks the encoding)
	cellBool
	cellNumber
	cellJSON // nested: the cell is JSON text
)

func openCSV(sch *schema.Schema, rs readSource, batch int) (batchReader, error) {
	cr := csv.NewReader(bufio.NewReaderSize(rs.r, 1<<20))
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, &RefusedError{Problem: "the file is empty; a CSV source starts with a header row naming the columns"}
	}
	if err != nil {
		return nil, &RefusedError{Location: Location{Line: 1}, Problem: "the header row does not parse: " + err.Error()}
	}
	r := &csvReader{cr: cr, c: rs.c, batch: batch}
	seen := map[string]bool{}
	cols := sch.Columns()
	for i, h := range header {
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff") // a byte order mark
		}
		if h == schema.ColumnOffset || h == schema.ColumnTS {
			return nil, &RefusedError{Column: h, Problem: "the header names a system column; streamcast assigns offsets and stamps itself, so drop it from the source"}
		}
		k, ok := sch.ColumnIndex(h)
		if !ok {
			return nil, &RefusedError{Column: h, Problem: "the header names a column the schema does not declare"}
		}
		if seen[h] {
			return nil, &RefusedError{Column: h, Problem: "the header names this column twice"}
		}
		seen[h] = true
		c := cols[k]
		key, _ := json.Marshal(h)
		r.cols = append(r.cols, csvCol{name: h, key: append(key, ':'), kind: kindOf(c.Type), nullable: c.Nullable})
	}
	for _, c := range cols {
		if !seen[c.Name] && c.Required {
			return nil, &RefusedError{Column: c.Name, Problem: fmt.Sprintf("the header lacks this declared column (%s), which every row must have", c.Type)}
		}
	}
	cr.FieldsPerRecord = len(header)
	r.b = newRowBuilder(sch)
	hl, _ := cr.FieldPos(0)
	r.nextLine = int64(hl) + 1
	return r, nil
}

func kindOf(t arrow.DataType) cellKind {
	switch t.ID() {
	case arrow.BOOL:
		return cellBool
	case arrow.INT32, arrow.INT64, arrow.FLOAT32, arrow.FLOAT64:
		return cellNumber
	case arrow.STRUCT, arrow.LIST, arrow.MAP:
		return cellJSON
	}
	return cellString
}

// object writes one record as a JSON object, each cell by its column's
// kind; a cell that cannot be its column's value is refused here, with a
// CSV-worded problem, before the decoder sees it.
func (r *csvReader) object(rec []string) ([]byte, *csvCol, string) {
	js := append(r.js[:0], '{')
	for i, cell := range rec {
		c := &r.cols[i]
		if i > 0 {
			js = append(js, ',')
		}
		js = append(js, c.key...)
		if cell == "" {
			if !c.nullable {
				return nil, c, "the field is empty (null), and the column is not nullable"
			}
			js = append(js, "null"...)
			continue
		}
		switch c.kind {
		case cellString:
			js = schema.AppendJSONString(js, []byte(cell))
		case cellBool:
			if cell != "true" && cell != "false" {
				return nil, c, fmt.Sprintf("a boolean is true or false, not %q", cell)
			}
			js = append(js, cell...)
		case cellNumber:
			if !numberText(cell) {
				return nil, c, fmt.Sprintf("%q is not a number", cell)
			}
			js = append(js, cell...)
		case cellJSON:
			if !json.Valid([]byte(cell)) {
				return nil, c, "a nested column's field holds JSON text, and this is not valid JSON"
			}
			js = append(js, cell...)
		}
	}
	r.js = append(js, '}')
	return r.js, nil, ""
}

// numberText reports whether s is one JSON number token (RFC 8259's
// grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?), so a cell can
// never carry more than its own value into the row. It runs on every
// numeric cell, so it scans by hand rather than through json.Valid.
func numberText(s string) bool {
	i := 0
	digits := func() bool {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		digits()
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}

func (r *csvReader) next(ctx context.Context) (arrow.RecordBatch, error) {
	for r.b.n < r.batch {
		rec, err := r.cr.Read()
		at := Location{Row: r.rows + int64(r.b.n) + 1, Line: r.nextLine}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.b.reset()
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				at.Line = int64(pe.StartLine)
				return nil, &RefusedError{Location: at, Problem: "the line does not parse as CSV: " + pe.Err.Error()}
			}
			return nil, err
		}
		line, _ := r.cr.FieldPos(0)
		at.Line = int64(line)
		js, col, prob := r.object(rec)
		if col != nil {
			r.b.reset()
			return nil, &RefusedError{Location: at, Column: col.name, Problem: prob}
		}
		if err := r.b.sch.Decode(&r.dec, js); err != nil {
			r.b.reset()
			return nil, refusal(err, at)
		}
		if err := r.b.add(r.dec.Canonical); err != nil {
			r.b.reset()
			return nil, fmt.Errorf("line %d: %w", at.Line, err)
		}
		r.nextLine = int64(line) + 1
	}
	if r.b.n == 0 {
		return nil, io.EOF
	}
	r.rows += int64(r.b.n)
	return r.b.batch(), nil
}

func (r *csvReader) skip(n int64) (int64, error) {
	var done int64
	for done < n {
		_, err := r.cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return done, err
		}
		line, _ := r.cr.FieldPos(0)
		r.nextLine = int64(line) + 1
		done++
	}
	r.rows += done
	return done, nil
}

func (r *csvReader) row() int64  { return r.rows }
func (r *csvReader) line() int64 { return r.nextLine }
func (r *csvReader) close() error {
	r.b.release()
	if r.c != nil {
		return r.c.Close()
	}
	return nil
}

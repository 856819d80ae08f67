package sqlview

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// Format is how Write prints a result.
type Format string

// The formats Write knows.
const (
	FormatTable   Format = "table"   // a drawn table, for a terminal
	FormatCSV     Format = "csv"     // a header line, then one line per row
	FormatJSON    Format = "json"    // one JSON array of row objects
	FormatNDJSON  Format = "ndjson"  // one JSON object per row and line
	FormatParquet Format = "parquet" // one Parquet file
)

// Formats lists the formats, for flags and messages.
func Formats() []string {
	return []string{string(FormatTable), string(FormatCSV), string(FormatJSON), string(FormatNDJSON), string(FormatParquet)}
}

// Write prints every row of r in format f and reports how many it wrote.
// Values print as SQLite returns them: integers, floats (shortest form,
// 85565.0 keeps its .0), text, NULL as null (empty in csv, NULL in a
// table); blobs as base64 text; a column read straight from a struct,
// list or map column (DeclJSON) as the JSON it holds.
func Write(w io.Writer, r *Rows, f Format) (int64, error) {
	var n int64
	var err error
	switch f {
	case FormatNDJSON, FormatJSON:
		n, err = writeJSON(w, r, f == FormatJSON)
	case FormatCSV:
		n, err = writeCSV(w, r)
	case FormatTable:
		n, err = writeTable(w, r)
	case FormatParquet:
		n, err = writeParquet(w, r)
	default:
		return 0, fmt.Errorf("unknown format %q; the formats are %s", f, strings.Join(Formats(), ", "))
	}
	if err != nil {
		return n, err
	}
	return n, r.Err()
}

// appendFloat writes a float as the frames do: the shortest decimal that
// reads back to f, plain with a ".0" kept when integral for 1e-6 <= |f| <
// 1e21, in exponent form otherwise; NaN and infinities, which JSON cannot
// hold, as null.
func appendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		return strconv.AppendFloat(dst, f, 'g', -1, 64)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, 64)
	if !strings.Contains(string(dst[start:]), ".") {
		dst = append(dst, ".0"...)
	}
	return dst
}

// appendJSONValue writes one value of column c as JSON.
func appendJSONValue(dst []byte, c ResultColumn, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case float64:
		return appendFloat(dst, x)
	case []byte:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, x)
		return append(dst, '"')
	case string:
		if c.DeclType == DeclJSON && json.Valid([]byte(x)) {
			return append(dst, x...)
		}
		b, _ := json.Marshal(x)
		return append(dst, b...)
	case bool:
		return strconv.AppendBool(dst, x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return append(dst, "null"...)
	}
	return append(dst, b...)
}

// textValue is one value as table and csv cells print it.
func textValue(v any, null string) string {
	switch x := v.(type) {
	case nil:
		return null
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return string(appendFloat(nil, x))
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// writeJSON writes the rows as NDJSON, or as one JSON array.
func writeJSON(w io.Writer, r *Rows, array bool) (int64, error) {
	if array {
		return writeJSONRows(w, r, jsonLayout{open: "[", sep: ",\n", close: "]\n"})
	}
	return writeJSONRows(w, r, jsonLayout{after: "\n"})
}

// jsonLayout is what writeJSONRows puts around the row objects.
type jsonLayout struct {
	open, sep, after, close string // before all, between two, after each, after all
}

func writeJSONRows(w io.Writer, r *Rows, l jsonLayout) (int64, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	cols := r.Columns()
	keys := make([][]byte, len(cols))
	for i, c := range cols {
		k, _ := json.Marshal(c.Name)
		keys[i] = append(k, ':')
	}
	var n int64
	line := []byte(l.open)
	for r.Next() {
		if n > 0 {
			line = append(line, l.sep...)
		}
		line = append(line, '{')
		for i, v := range r.Values() {
			if i > 0 {
				line = append(line, ',')
			}
			line = append(line, keys[i]...)
			line = appendJSONValue(line, cols[i], v)
		}
		line = append(line, '}')
		line = append(line, l.after...)
		if _, err := bw.Write(line); err != nil {
			return n, err
		}
		line = line[:0]
		n++
	}
	line = append(line, l.close...)
	if _, err := bw.Write(line); err != nil {
		return n, err
	}
	return n, bw.Flush()
}

func writeCSV(w io.Writer, r *Rows) (int64, error) {
	cols := r.Columns()
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	cw, err := newCSVWriter(w, names)
	if err != nil {
		return 0, err
	}
	var n int64
	for r.Next() {
		if err := cw.row(r.Values()); err != nil {
			return n, err
		}
		n++
	}
	return n, cw.flush()
}

// writeTable draws the result with tablewriter. A table is drawn once its
// widths are known, so it holds every row: for a terminal, not for bulk
// output (use ndjson, csv or parquet).
func writeTable(w io.Writer, r *Rows) (int64, error) {
	cols := r.Columns()
	header := make([]string, len(cols))
	for i, c := range cols {
		header[i] = c.Name
	}
	var rows [][]string
	for r.Next() {
		row := make([]string, len(cols))
		for i, v := range r.Values() {
			row[i] = textValue(v, "NULL")
		}
		rows = append(rows, row)
	}
	if err := r.Err(); err != nil {
		return 0, err
	}
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off), tablewriter.WithRowAutoWrap(tw.WrapNone))
	t.Header(header)
	if err := t.Bulk(rows); err != nil {
		return 0, err
	}
	if err := t.Render(); err != nil {
		return 0, err
	}
	plural := "s"
	if len(rows) == 1 {
		plural = ""
	}
	_, err := fmt.Fprintf(w, "(%d row%s)\n", len(rows), plural)
	return int64(len(rows)), err
}

package txbox

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/streamcast/streamcast/pkg/schema"
)

// The system columns of a table a stream lands in: the row's offset (the
// primary key) and the server's commit stamp in µs since the epoch.
const (
	OffsetColumn = schema.ColumnOffset // "streamcast_offset"
	TSColumn     = "streamcast_ts"
	// RowColumn holds the whole row as JSON text when the stream declares
	// no schema.
	RowColumn = "row"
)

// SQLType is the column type a stream column takes in a table of dialect
// d. It is the one mapping from a stream's schema to SQL tables (`tail
// --into` uses it; reading a stream as a table should too): integers are
// INTEGER (int32) or BIGINT, numbers REAL (float) or DOUBLE PRECISION,
// booleans BOOLEAN (INTEGER 0/1 in SQLite), strings TEXT, binary columns
// BYTEA/BLOB holding the decoded bytes, and structs, lists and maps TEXT
// holding their JSON as the server sent it. SQLite's types are its
// affinities: INTEGER, REAL, TEXT, BLOB.
func SQLType(d Dialect, c schema.Column) string {
	pg := d == Postgres
	switch c.Type.ID() {
	case arrow.INT32:
		return "INTEGER"
	case arrow.INT64:
		return d.BigInt()
	case arrow.FLOAT32:
		return "REAL"
	case arrow.FLOAT64:
		if pg {
			return "DOUBLE PRECISION"
		}
		return "REAL"
	case arrow.BOOL:
		if pg {
			return "BOOLEAN"
		}
		return "INTEGER"
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY:
		return d.Bytes()
	}
	return d.Text() // strings; structs, lists and maps as JSON
}

// tableColumns are the columns of a landing table, system columns first.
type tableColumns struct {
	cols []schema.Column // nil: no schema, the row lands whole in RowColumn
}

func (tc tableColumns) names() []string {
	names := []string{OffsetColumn, TSColumn}
	if tc.cols == nil {
		return append(names, RowColumn)
	}
	for _, c := range tc.cols {
		names = append(names, c.Name)
	}
	return names
}

// ddl is the CREATE TABLE of a landing table.
func (tc tableColumns) ddl(d Dialect, table string) string {
	var b bytes.Buffer
	b.WriteString("CREATE TABLE IF NOT EXISTS " + quoteIdent(table) + " (" +
		OffsetColumn + " " + d.BigInt() + " PRIMARY KEY, " + TSColumn + " " + d.BigInt())
	if tc.cols == nil {
		b.WriteString(", " + RowColumn + " " + d.Text() + " NOT NULL")
	}
	for _, c := range tc.cols {
		b.WriteString(", " + quoteIdent(c.Name) + " " + SQLType(d, c))
		if !c.Nullable {
			b.WriteString(" NOT NULL")
		}
	}
	b.WriteString(")")
	return b.String()
}

// values converts a canonical row to its column values, in column order.
func (tc tableColumns) values(offset int64, row []byte) ([]any, error) {
	if tc.cols == nil {
		return []any{string(row)}, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(row, &fields); err != nil {
		return nil, fmt.Errorf("row at offset %d is not a JSON object: %w", offset, err)
	}
	out := make([]any, len(tc.cols))
	for i, c := range tc.cols {
		raw, ok := fields[c.Name]
		delete(fields, c.Name)
		if !ok || string(raw) == "null" {
			continue // nil: NULL
		}
		v, err := sqlValue(c, raw)
		if err != nil {
			return nil, fmt.Errorf("row at offset %d, column %q: %w", offset, c.Name, err)
		}
		out[i] = v
	}
	for name := range fields {
		return nil, fmt.Errorf("row at offset %d has column %q, which the table's columns (from the stream's schema at the first connect) lack; the stream's schema changed: land it in a new table", offset, name)
	}
	return out, nil
}

// sqlValue converts one column's JSON value to what database/sql stores.
func sqlValue(c schema.Column, raw json.RawMessage) (any, error) {
	switch c.Type.ID() {
	case arrow.INT32, arrow.INT64:
		return strconv.ParseInt(string(raw), 10, 64)
	case arrow.FLOAT32, arrow.FLOAT64:
		return strconv.ParseFloat(string(raw), 64)
	case arrow.BOOL:
		return strconv.ParseBool(string(raw))
	case arrow.STRING, arrow.LARGE_STRING:
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if c.Encoding == schema.EncodingBase64 {
			return base64.StdEncoding.DecodeString(s)
		}
		return hex.DecodeString(s)
	}
	return string(raw), nil // nested: the JSON text as sent
}

package sqlview

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"modernc.org/sqlite/vtab"

	"github.com/streamcast/streamcast/pkg/schema"
)

// kind is how a column's Arrow type shows in SQLite.
type kind int

const (
	kindInt     kind = iota // INTEGER: every Arrow integer type
	kindFloat               // REAL: float64
	kindFloat32             // REAL: float32, as its shortest decimal (0.1, not 0.10000000149011612)
	kindText                // TEXT: strings
	kindBlob                // BLOB: binary
	kindBool                // INTEGER 0/1
	kindJSON                // TEXT holding JSON: struct, list, map
)

// DeclJSON is the declared SQLite type of struct, list and map columns. It
// reads as TEXT to SQLite (its affinity is TEXT), and tells the writers in
// this package that the text is JSON to print as such.
const DeclJSON = "JSON TEXT"

// decl is the type log declares for a column of kind k.
func (k kind) decl() string {
	switch k {
	case kindInt, kindBool:
		return "INTEGER"
	case kindFloat, kindFloat32:
		return "REAL"
	case kindText:
		return "TEXT"
	case kindBlob:
		return "BLOB"
	default:
		return DeclJSON
	}
}

// column is one column of log.
type column struct {
	field arrow.Field
	kind  kind
	json  *nestedEncoder // kindJSON only
}

// kindOf maps an Arrow type to its SQLite kind (the table in
// docs/reading-history.md).
func kindOf(dt arrow.DataType) (kind, bool) {
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return kindInt, true
	case arrow.FLOAT64:
		return kindFloat, true
	case arrow.FLOAT32:
		return kindFloat32, true
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return kindText, true
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY, arrow.BINARY_VIEW:
		return kindBlob, true
	case arrow.BOOL:
		return kindBool, true
	case arrow.STRUCT, arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST, arrow.MAP:
		return kindJSON, true
	case arrow.DICTIONARY:
		return kindOf(dt.(*arrow.DictionaryType).ValueType)
	}
	return 0, false
}

// columnsOf maps a Table's schema to log's columns. SQLite compares
// column names without regard to case, so two names that differ only in
// case are refused rather than one of them becoming unreachable.
func columnsOf(s *arrow.Schema) ([]column, error) {
	if s == nil || s.NumFields() == 0 {
		return nil, fmt.Errorf("sqlview: the table has no columns")
	}
	seen := make(map[string]string, s.NumFields())
	cols := make([]column, 0, s.NumFields())
	for _, f := range s.Fields() {
		low := strings.ToLower(f.Name)
		if prev, ok := seen[low]; ok {
			return nil, fmt.Errorf("sqlview: columns %q and %q differ only in case, which SQL cannot tell apart", prev, f.Name)
		}
		seen[low] = f.Name
		k, ok := kindOf(f.Type)
		if !ok {
			return nil, fmt.Errorf("sqlview: column %q has Arrow type %s, which has no SQLite form here (integers, floats, strings, booleans, binary, struct, list and map do)", f.Name, f.Type)
		}
		c := column{field: f, kind: k}
		if k == kindJSON {
			c.json = newNestedEncoder(f)
		}
		cols = append(cols, c)
	}
	i := s.FieldIndices(columnOffset)
	if len(i) != 1 || s.Field(i[0]).Type.ID() != arrow.INT64 {
		return nil, fmt.Errorf("sqlview: the table has no int64 column %s; it numbers the rows", columnOffset)
	}
	return cols, nil
}

// createTable is the CREATE TABLE statement log declares to SQLite.
func createTable(cols []column) string {
	var b strings.Builder
	b.WriteString("CREATE TABLE x(")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteIdent(c.field.Name))
		b.WriteByte(' ')
		b.WriteString(c.kind.decl())
	}
	b.WriteByte(')')
	return b.String()
}

// quoteIdent quotes an SQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// getter returns cell i of one array as a SQLite value. It is built once
// per record batch, so the per-cell path is a type-asserted array access.
type getter func(i int) vtab.Value

// getterFor builds the getter of arr, a batch's array for column c. The
// array's own type decides (a reader may hand back a dictionary or a large
// string where the schema says string); a type with no SQLite form is an
// error naming the column.
func getterFor(c *column, arr arrow.Array) (getter, error) {
	switch a := arr.(type) {
	case *array.Int64:
		return func(i int) vtab.Value { return a.Value(i) }, nil
	case *array.Int32:
		return func(i int) vtab.Value { return int64(a.Value(i)) }, nil
	case *array.Int16:
		return func(i int) vtab.Value { return int64(a.Value(i)) }, nil
	case *array.Int8:
		return func(i int) vtab.Value { return int64(a.Value(i)) }, nil
	case *array.Uint32:
		return func(i int) vtab.Value { return int64(a.Value(i)) }, nil
	case *array.Uint16:
		return func(i int) vtab.Value { return int64(a.Value(i)) }, nil
	case *array.Uint8:
		return func(i int) vtab.Value { return int64(a.Value(i)) }, nil
	case *array.Uint64:
		// SQLite has no unsigned integers; above int64 it shows as REAL,
		// as SQLite's own CAST of such a value would.
		return func(i int) vtab.Value {
			if v := a.Value(i); v <= math.MaxInt64 {
				return int64(v)
			} else {
				return float64(v)
			}
		}, nil
	case *array.Float64:
		return func(i int) vtab.Value { return a.Value(i) }, nil
	case *array.Float32:
		return func(i int) vtab.Value { return float32Value(a.Value(i)) }, nil
	case *array.Boolean:
		return func(i int) vtab.Value {
			if a.Value(i) {
				return int64(1)
			}
			return int64(0)
		}, nil
	case *array.String:
		return func(i int) vtab.Value { return a.Value(i) }, nil
	case *array.LargeString:
		return func(i int) vtab.Value { return a.Value(i) }, nil
	case *array.StringView:
		return func(i int) vtab.Value { return a.Value(i) }, nil
	case *array.Binary:
		return func(i int) vtab.Value { return a.Value(i) }, nil
	case *array.LargeBinary:
		return func(i int) vtab.Value { return a.Value(i) }, nil
	case *array.BinaryView:
		return func(i int) vtab.Value { return a.Value(i) }, nil
	case *array.FixedSizeBinary:
		return func(i int) vtab.Value { return a.Value(i) }, nil
	case *array.Dictionary:
		inner, err := getterFor(c, a.Dictionary())
		if err != nil {
			return nil, err
		}
		dict := a.Dictionary()
		return func(i int) vtab.Value {
			j := a.GetValueIndex(i)
			if dict.IsNull(j) {
				return nil
			}
			return inner(j)
		}, nil
	case *array.Struct, *array.List, *array.LargeList, *array.FixedSizeList, *array.Map:
		enc := c.json
		if enc == nil {
			enc = newNestedEncoder(arrow.Field{Name: c.field.Name, Type: arr.DataType(), Nullable: true})
		}
		return enc.getter(arr), nil
	}
	return nil, fmt.Errorf("sqlview: column %q arrived as Arrow %s, which has no SQLite form here", c.field.Name, arr.DataType())
}

// float32Value is a float32 as the double its shortest decimal names, so
// 0.1 published into a float32 column reads back as 0.1, as the canonical
// JSON frames print it.
func float32Value(f float32) float64 {
	v, err := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	if err != nil {
		return float64(f)
	}
	return v
}

// nestedEncoder writes a struct, list or map value as JSON text: the
// stream's canonical JSON (pkg/schema) when the column is one a stream
// schema can declare, so a value reads as it does in a frame, and Arrow's
// own JSON form otherwise.
type nestedEncoder struct {
	typ    arrow.DataType
	sch    *schema.Schema // nil: fall back to Arrow's JSON
	prefix int            // len(`{"name":`) that AppendJSON writes before the value
	buf    []byte
}

func newNestedEncoder(f arrow.Field) *nestedEncoder {
	e := &nestedEncoder{typ: f.Type}
	f.Nullable = true
	if s, err := schema.FromArrow(arrow.NewSchema([]arrow.Field{f}, nil)); err == nil {
		e.sch = s
		e.prefix = 1 + len(schema.AppendJSONString(nil, []byte(f.Name))) + 1
	}
	return e
}

func (e *nestedEncoder) getter(arr arrow.Array) getter {
	if e.sch != nil && arrow.TypeEqual(arr.DataType(), e.typ) {
		cols := []arrow.Array{arr}
		return func(i int) vtab.Value {
			e.buf = e.sch.AppendJSON(e.buf[:0], cols, i)
			// AppendJSON writes the row {"name":value}; the value is
			// between the key and the closing brace.
			return string(e.buf[e.prefix : len(e.buf)-1])
		}
	}
	return func(i int) vtab.Value {
		b, err := json.Marshal(arr.GetOneForMarshal(i))
		if err != nil {
			return nil
		}
		return string(b)
	}
}

package sqlview

import (
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// parquetBatch is how many result rows make one record batch (and decide
// the types of columns SQLite did not declare).
const parquetBatch = 64 << 10

// writeParquet writes the result as one Parquet file. A column's type is
// its declared type when SQLite gives one (a column read straight from
// log), and otherwise the type of its values in the first batch:
// INTEGER → int64, REAL → float64 (integers widen), TEXT → string, BLOB
// → binary; a column of nothing but NULL is a string column. SQLite lets
// one column hold values of several types; one that cannot be written in
// its column's type is refused, naming the column, with the CAST that
// fixes it.
func writeParquet(w io.Writer, r *Rows) (int64, error) {
	cols := r.Columns()
	var batch [][]any
	var fw *pqarrow.FileWriter
	var schema *arrow.Schema
	var n int64
	flush := func() error {
		if fw == nil {
			types := parquetTypes(cols, batch)
			fields := make([]arrow.Field, len(cols))
			for i, c := range cols {
				fields[i] = arrow.Field{Name: c.Name, Type: types[i], Nullable: true}
			}
			props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd))
			schema = arrow.NewSchema(fields, nil)
			var err error
			fw, err = pqarrow.NewFileWriter(schema, w, props, pqarrow.DefaultWriterProps())
			if err != nil {
				return fmt.Errorf("parquet: %w", err)
			}
		}
		rec, err := parquetRecord(schema, cols, batch, n-int64(len(batch)))
		if err != nil {
			return err
		}
		defer rec.Release()
		batch = batch[:0]
		return fw.Write(rec)
	}
	for r.Next() {
		batch = append(batch, append([]any(nil), r.Values()...))
		n++
		if len(batch) == parquetBatch {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := r.Err(); err != nil {
		return n, err
	}
	if len(batch) > 0 || fw == nil {
		if err := flush(); err != nil {
			return n, err
		}
	}
	return n, fw.Close()
}

func parquetTypes(cols []ResultColumn, batch [][]any) []arrow.DataType {
	types := make([]arrow.DataType, len(cols))
	for i, c := range cols {
		switch c.DeclType {
		case "INTEGER":
			types[i] = arrow.PrimitiveTypes.Int64
		case "REAL":
			types[i] = arrow.PrimitiveTypes.Float64
		case "BLOB":
			types[i] = arrow.BinaryTypes.Binary
		case "TEXT", DeclJSON:
			types[i] = arrow.BinaryTypes.String
		}
		if types[i] != nil {
			continue
		}
		var sawInt, sawFloat, sawText, sawBlob bool
		for _, row := range batch {
			switch row[i].(type) {
			case int64:
				sawInt = true
			case float64:
				sawFloat = true
			case string:
				sawText = true
			case []byte:
				sawBlob = true
			}
		}
		switch {
		case sawText:
			types[i] = arrow.BinaryTypes.String
		case sawBlob:
			types[i] = arrow.BinaryTypes.Binary
		case sawFloat:
			types[i] = arrow.PrimitiveTypes.Float64
		case sawInt:
			types[i] = arrow.PrimitiveTypes.Int64
		default:
			types[i] = arrow.BinaryTypes.String
		}
	}
	return types
}

// parquetRecord builds one record batch; first is the result row number
// of batch[0], for messages.
func parquetRecord(s *arrow.Schema, cols []ResultColumn, batch [][]any, first int64) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	for i := range cols {
		fb := b.Field(i)
		for k, row := range batch {
			v := row[i]
			if v == nil {
				fb.AppendNull()
				continue
			}
			ok := true
			switch fb := fb.(type) {
			case *array.Int64Builder:
				x, isInt := v.(int64)
				ok = isInt
				if ok {
					fb.Append(x)
				}
			case *array.Float64Builder:
				switch x := v.(type) {
				case float64:
					fb.Append(x)
				case int64:
					fb.Append(float64(x))
				default:
					ok = false
				}
			case *array.StringBuilder:
				switch x := v.(type) {
				case string:
					fb.Append(x)
				default:
					fb.Append(textValue(x, ""))
				}
			case *array.BinaryBuilder:
				switch x := v.(type) {
				case []byte:
					fb.Append(x)
				case string:
					fb.Append([]byte(x))
				default:
					ok = false
				}
			}
			if !ok {
				return nil, fmt.Errorf("parquet: column %q is %s, but result row %d holds %T %v there; CAST the column in the query (such as CAST(%s AS REAL) or AS TEXT) to give it one type",
					cols[i].Name, s.Field(i).Type, first+int64(k)+1, v, v, quoteIdent(cols[i].Name))
			}
		}
	}
	return b.NewRecordBatch(), nil
}

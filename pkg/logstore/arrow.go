package logstore

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/streamcast/streamcast/pkg/schema"
)

// fileSchema is the Arrow schema of a log's sealed files:
// streamcast_offset, streamcast_ts, then the declared columns. A stream
// without a schema keeps each row's JSON in one string column.
func fileSchema(sch *schema.Schema) *arrow.Schema {
	fields := []arrow.Field{
		{Name: OffsetColumn, Type: arrow.PrimitiveTypes.Int64},
		{Name: TSColumn, Type: arrow.PrimitiveTypes.Int64},
	}
	if sch.IsAny() {
		fields = append(fields, arrow.Field{Name: RowColumn, Type: arrow.BinaryTypes.String})
	} else {
		fields = append(fields, sch.Arrow().Fields()...)
	}
	return arrow.NewSchema(fields, nil)
}

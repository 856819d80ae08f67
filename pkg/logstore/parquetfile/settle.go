package parquetfile

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// SettleNullCounts computes, now, every null count in rec that arrow-go
// would otherwise compute lazily on first use, nested children included.
// arrow-go caches that count in the array's shared data on first read, a
// write; so a record that two goroutines read at once (the Parquet writer
// and the column statistics beside it) must have them settled first.
func SettleNullCounts(rec arrow.RecordBatch) {
	for _, col := range rec.Columns() {
		settle(col.Data())
	}
}

func settle(d arrow.ArrayData) {
	a := array.MakeFromData(d)
	a.NullN()
	a.Release()
	for _, c := range d.Children() {
		settle(c)
	}
}

package logstore

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/streamcast/streamcast/pkg/logstore/parquetfile"
	"github.com/streamcast/streamcast/pkg/schema"
)

// statsBeside starts computing the column statistics of rec's declared
// columns (those after streamcast_offset and streamcast_ts) on a goroutine
// of its own, so they cost no time beside the Parquet write of the same
// record, and returns the wait for them. The caller owns the goroutine:
// it must call wait on every path, and may call it more than once.
//
// Both goroutines read rec, and arrow-go caches a null count in the
// array's shared data on its first read, which is a write: the counts are
// settled here, before the two start.
func statsBeside(sch *schema.Schema, rec arrow.RecordBatch) (wait func() ([]byte, error)) {
	parquetfile.SettleNullCounts(rec)
	var stats []byte
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		stats, err = Compute(sch, rec.Columns()[2:])
	}()
	return func() ([]byte, error) {
		<-done
		return stats, err
	}
}

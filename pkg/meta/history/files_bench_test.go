package history_test

import (
	"context"
	"io"
	"testing"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta/history"
)

// BenchmarkReadManyFiles reads a table of many small files (600 files of
// 500 rows), where what a read does per file (open it, check its footer
// against the manifest and its offsets against the footer) weighs most
// against the rows: count reads only streamcast_offset, as sql's count(*)
// does; frames exports every column as snapshot --format frames does.
func BenchmarkReadManyFiles(b *testing.B) {
	// A seal cuts at commit-group boundaries: groups of batch rows and a
	// seal target below a group's size make one file per group.
	const n, batch = 300_000, 500
	f, _ := tradesStreamOf(b, n, false, batch, func(c *logstore.Config) {
		c.TargetSealBytes = 32 << 10
		c.TargetFileBytes = 16 << 10 // below a sealed file: nothing is merged
	})
	ctx := context.Background()
	read := func(b *testing.B, fn func(r *history.Reader) (int64, error)) {
		files := 0
		b.ResetTimer()
		cpu0 := cpuTime()
		for range b.N {
			r, err := history.Open(ctx, history.Options{Root: f.root, Stream: stream})
			if err != nil {
				b.Fatal(err)
			}
			rows, err := fn(r)
			files = r.Stats().FilesOpened
			_ = r.Close()
			if err != nil {
				b.Fatal(err)
			}
			if rows != n {
				b.Fatalf("read %d rows, want %d", rows, n)
			}
		}
		// CPU per read says what the code costs; on a shared box the
		// wall time says mostly how loaded it was.
		b.ReportMetric(float64(cpuTime()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
		b.ReportMetric(float64(files), "files")
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	}
	b.Run("count", func(b *testing.B) {
		read(b, func(r *history.Reader) (int64, error) {
			rr, err := r.Scan(ctx, history.ScanRequest{Columns: []string{logstore.OffsetColumn}})
			if err != nil {
				return 0, err
			}
			defer rr.Release()
			var rows int64
			for rr.Next() {
				rows += rr.RecordBatch().NumRows()
			}
			return rows, rr.Err()
		})
	})
	b.Run("frames", func(b *testing.B) {
		read(b, func(r *history.Reader) (int64, error) {
			res, err := r.Export(ctx, history.ExportOptions{Format: history.FormatFrames, Out: io.Discard})
			return res.Rows, err
		})
	})
}

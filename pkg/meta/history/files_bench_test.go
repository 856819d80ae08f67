package history_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/tier"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
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
	f := newFixture(b, false)
	ctx := context.Background()
	if err := os.MkdirAll(f.lay.StreamDir(stream), 0o755); err != nil {
		b.Fatal(err)
	}
	sch := compile(b, tradesSchema)
	cfg := f.logConfig(stream)
	cfg.TargetSealBytes = 32 << 10
	cfg.TargetFileBytes = 16 << 10 // below a sealed file: nothing is merged
	lg, err := logstore.Create(f.lay.LogDir(stream, stream), sch, cfg)
	if err != nil {
		b.Fatal(err)
	}
	symbols := []string{"BTC-USD", "ETH-USD", "SOL-USD", "XRP-USD"}
	for i := 0; i < n; i += batch {
		rows := make([][]byte, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			rows = append(rows, fmt.Appendf(nil, `{"event_ts":%d,"symbol":"%s","price":%d.5,"amount":0.015,"side":%d,"trade_id":null}`,
				baseTS+int64(j), symbols[j%4], 85000+j%1000, j%2))
		}
		if _, err := lg.Append(ctx, rows, baseTS+int64(i), nil); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := tier.PublishAll(ctx, lg); err != nil {
		b.Fatal(err)
	}
	md, err := meta.New(stream)
	if err != nil {
		b.Fatal(err)
	}
	d, err := meta.DescribeLog(lg, 1)
	if err != nil {
		b.Fatal(err)
	}
	_ = lg.Close()
	if err := md.AddLog(d, sch); err != nil {
		b.Fatal(err)
	}
	st, err := meta.NewStore(ctx, f.lay, stream, warehouse.S3(f.s3cfg))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.Commit(ctx, md); err != nil {
		b.Fatal(err)
	}
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

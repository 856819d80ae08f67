package history_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/history"
	"github.com/streamcast/streamcast/pkg/wire"
)

// tradesSchema is the README's demo schema.
const tradesSchema = `{"type":"object","properties":{"event_ts":{"type":"integer"},"symbol":{"type":"string"},"price":{"type":"number"},"amount":{"type":"number"},"side":{"type":"integer","format":"int32"},"trade_id":{"type":["string","null"]}},"required":["event_ts","symbol","price","amount","side","trade_id"]}`

// benchRows is the number of published rows the benchmarks read:
// STREAMCAST_BENCH_ROWS, or 1,000,000 (the 10M scaled down to
// what a shared two-core box builds in seconds).
func benchRows(b *testing.B) int {
	if v := os.Getenv("STREAMCAST_BENCH_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("STREAMCAST_BENCH_ROWS=%q: give a row count", v)
		}
		return n
	}
	return 1_000_000
}

// tradesStream builds a stream of n published trades under a root (and
// an s3:// prefix on versitygw when onS3), once per benchmark.
func tradesStream(b *testing.B, n int, onS3 bool) (*fixture, string) {
	return tradesStreamOf(b, n, onS3, 10_000, nil)
}

// tradesStreamOf is tradesStream committing batch rows at a time, with
// tune (when not nil) setting the log's config: a seal cuts at commit
// groups, so a seal target below a group's size makes a file per group.
func tradesStreamOf(b *testing.B, n int, onS3 bool, batch int, tune func(*logstore.Config)) (*fixture, string) {
	b.Helper()
	f := newFixture(b, onS3)
	ctx := context.Background()
	if err := os.MkdirAll(f.lay.StreamDir(stream), 0o755); err != nil {
		b.Fatal(err)
	}
	sch := compile(b, tradesSchema)
	cfg := f.logConfig(stream)
	if tune != nil {
		tune(&cfg)
	}
	lg, err := logstore.Create(f.lay.LogDir(stream, stream), sch, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer lg.Close()
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
	if _, err := lg.PublishAll(ctx); err != nil {
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
	if err := md.AddLog(d, sch); err != nil {
		b.Fatal(err)
	}
	st, err := meta.NewStore(ctx, f.lay, stream, f.s3cfg)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.Commit(ctx, md); err != nil {
		b.Fatal(err)
	}
	return f, st.PublishedHintURI()
}

func BenchmarkSnapshot(b *testing.B) {
	n := benchRows(b)
	f, _ := tradesStream(b, n, false)
	for _, format := range []string{history.FormatParquet, history.FormatFrames, history.FormatNDJSON} {
		b.Run(format, func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := range b.N {
				r, err := history.Open(ctx, history.Options{Root: f.root, Stream: stream})
				if err != nil {
					b.Fatal(err)
				}
				o := history.ExportOptions{Format: format, Out: io.Discard}
				if format == history.FormatParquet {
					o.Path = filepath.Join(dir, fmt.Sprintf("out-%d.parquet", i))
				}
				res, err := r.Export(ctx, o)
				_ = r.Close()
				if err != nil {
					b.Fatal(err)
				}
				if res.Rows != int64(n) {
					b.Fatalf("exported %d rows, want %d", res.Rows, n)
				}
				if o.Path != "" {
					_ = os.Remove(o.Path)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			reportCPU(b, n, cpu0)
		})
	}
}

// reportCPU reports rows per CPU-second since cpu0, every goroutine of
// the process counted (the scan's decoding as well as the writing).
func reportCPU(b *testing.B, n int, cpu0 time.Duration) {
	if used := cpuTime() - cpu0; used > 0 && cpu0 > 0 {
		b.ReportMetric(float64(n)*float64(b.N)/used.Seconds(), "rows/cpu-s")
	}
}

// BenchmarkCatchUp reads every published row as tail --catch-up does,
// framing each as the server would, from a local prefix and from an
// s3:// prefix on versitygw.
func BenchmarkCatchUp(b *testing.B) {
	n := benchRows(b)
	for _, where := range []string{"local", "s3"} {
		b.Run(where, func(b *testing.B) {
			f, uri := tradesStream(b, n, where == "s3")
			ctx := context.Background()
			var line []byte
			b.ResetTimer()
			for range b.N {
				rows := 0
				end, err := history.CatchUp(ctx, history.CatchUpOptions{MetadataURI: uri, S3: f.s3cfg}, 0, func(o, ts int64, row []byte) error {
					line = wire.AppendFrame(line[:0], o, ts, row)
					rows++
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				if rows != n || end != int64(n)+1 {
					b.Fatalf("caught up %d rows to %d, want %d to %d", rows, end, n, n+1)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

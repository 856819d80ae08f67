//go:build linux

package lifecycle_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/schema/source"
)

// tradesSchema is the demo stream's schema (config.DemoSchema): trades.
const tradesSchema = `{"type":"object","properties":{
 "event_ts":{"type":"integer"},
 "symbol":{"type":"string"},
 "price":{"type":"number"},
 "amount":{"type":"number"},
 "side":{"type":"integer","format":"int32"},
 "trade_id":{"type":["string","null"]}},
 "required":["event_ts","symbol","price","amount","side"]}`

var tradeSymbols = []string{"BTC-USD", "ETH-USD", "SOL-USD", "XRP-USD"}

var tradesArrow = arrow.NewSchema([]arrow.Field{
	{Name: "event_ts", Type: arrow.PrimitiveTypes.Int64},
	{Name: "symbol", Type: arrow.BinaryTypes.String},
	{Name: "price", Type: arrow.PrimitiveTypes.Float64},
	{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
	{Name: "side", Type: arrow.PrimitiveTypes.Int32},
	{Name: "trade_id", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// tradeBatch builds trades [from, to).
func tradeBatch(from, to int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, tradesArrow)
	defer b.Release()
	b.Reserve(to - from)
	for i := from; i < to; i++ {
		b.Field(0).(*array.Int64Builder).Append(1_735_689_600_000_000 + int64(i)*1000)
		b.Field(1).(*array.StringBuilder).Append(tradeSymbols[i%4])
		b.Field(2).(*array.Float64Builder).Append(60000 + float64(i%1000)/4)
		b.Field(3).(*array.Float64Builder).Append(float64(i%97) / 8)
		b.Field(4).(*array.Int32Builder).Append(int32(i % 2))
		if i%10 == 0 {
			b.Field(5).(*array.StringBuilder).AppendNull()
		} else {
			b.Field(5).(*array.StringBuilder).Append("t" + strconv.Itoa(i))
		}
	}
	return b.NewRecordBatch()
}

// writeTrades writes n trades in format f under dir.
func writeTrades(tb testing.TB, dir string, f source.Format, n int) string {
	tb.Helper()
	path := filepath.Join(dir, "trades."+string(f))
	fh, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer fh.Close()
	bw := bufio.NewWriterSize(fh, 1<<20)
	const batch = 1 << 16
	each := func(fn func(rec arrow.RecordBatch) error) {
		for i := 0; i < n; i += batch {
			rec := tradeBatch(i, min(n, i+batch))
			err := fn(rec)
			rec.Release()
			if err != nil {
				tb.Fatal(err)
			}
		}
	}
	switch f {
	case source.Parquet:
		w, err := pqarrow.NewFileWriter(tradesArrow, bw, parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy), parquet.WithMaxRowGroupLength(1<<20)), pqarrow.DefaultWriterProps())
		if err != nil {
			tb.Fatal(err)
		}
		// One row group per million rows, as writers commonly make them.
		for i := 0; i < n; i += 1 << 20 {
			rec := tradeBatch(i, min(n, i+1<<20))
			err := w.Write(rec)
			rec.Release()
			if err != nil {
				tb.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			tb.Fatal(err)
		}
	case source.ArrowFile:
		w, err := ipc.NewFileWriter(bw, ipc.WithSchema(tradesArrow))
		if err != nil {
			tb.Fatal(err)
		}
		each(w.Write)
		if err := w.Close(); err != nil {
			tb.Fatal(err)
		}
	case source.ArrowStream:
		w := ipc.NewWriter(bw, ipc.WithSchema(tradesArrow))
		each(w.Write)
		if err := w.Close(); err != nil {
			tb.Fatal(err)
		}
	case source.NDJSON, source.CSV:
		if f == source.CSV {
			bw.WriteString("event_ts,symbol,price,amount,side,trade_id\n")
		}
		var line []byte
		for i := range n {
			ts, sym, px, amt, side := 1_735_689_600_000_000+int64(i)*1000, tradeSymbols[i%4], 60000+float64(i%1000)/4, float64(i%97)/8, i%2
			line = line[:0]
			if f == source.CSV {
				line = fmt.Appendf(line, "%d,%s,%v,%v,%d,", ts, sym, px, amt, side)
				if i%10 != 0 {
					line = fmt.Appendf(line, "t%d", i)
				}
			} else {
				line = fmt.Appendf(line, `{"event_ts":%d,"symbol":"%s","price":%v,"amount":%v,"side":%d,"trade_id":`, ts, sym, px, amt, side)
				if i%10 != 0 {
					line = fmt.Appendf(line, `"t%d"}`, i)
				} else {
					line = append(line, "null}"...)
				}
			}
			bw.Write(append(line, '\n'))
		}
	}
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// tradesLog makes a stream "trades" with an empty log of the trades
// schema sorted by event_ts, as serve would, under a fresh root.
func tradesLog(tb testing.TB) *fixture {
	tb.Helper()
	f := &fixture{root: tb.TempDir()}
	var err error
	if f.lay, err = meta.NewLayout(f.root, ""); err != nil {
		tb.Fatal(err)
	}
	sch, err := schema.Compile([]byte(tradesSchema))
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(f.lay.StreamDir(stream), 0o755); err != nil {
		tb.Fatal(err)
	}
	cfg := logstore.Config{Stream: stream, Log: stream, SortBy: []string{"event_ts"}, Published: f.lay.StoredPublished(stream, stream)}
	lg, err := logstore.Create(f.lay.LogDir(stream, stream), sch, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	defer lg.Close()
	md, err := meta.New(stream)
	if err != nil {
		tb.Fatal(err)
	}
	d, err := meta.DescribeLog(lg, 1)
	if err != nil {
		tb.Fatal(err)
	}
	if err := md.AddLog(d, sch); err != nil {
		tb.Fatal(err)
	}
	st, err := meta.NewStore(context.Background(), f.lay, stream, warehouse.S3{})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := st.Commit(context.Background(), md); err != nil {
		tb.Fatal(err)
	}
	return f
}

// benchRows is how many trades a benchmark loads:
// STREAMCAST_INGEST_ROWS, else 2M (the 50M need time this box's
// shared cores do not have on every run).
func benchRows() int {
	if v, err := strconv.Atoi(os.Getenv("STREAMCAST_INGEST_ROWS")); err == nil && v > 0 {
		return v
	}
	return 2_000_000
}

// benchCache is where the benchmark's sources are made once and kept,
// named by format and row count, so that -count runs, later runs and
// profiles pay for them once: STREAMCAST_BENCH_CACHE (or the older
// STREAMCAST_INGEST_DIR), else streamcast-ingest-bench in the temp dir.
// Delete it to make them again.
func benchCache() string {
	for _, env := range []string{"STREAMCAST_BENCH_CACHE", "STREAMCAST_INGEST_DIR"} {
		if d := os.Getenv(env); d != "" {
			return d
		}
	}
	return filepath.Join(os.TempDir(), "streamcast-ingest-bench")
}

// benchSource returns the cached trades file of format f, making it the
// first time.
func benchSource(b *testing.B, f source.Format) string {
	dir := benchCache()
	p := filepath.Join(dir, fmt.Sprintf("trades-%d.%s", benchRows(), f))
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	// Made beside its final name and renamed, so a killed run leaves no
	// half file under it.
	tmp, err := os.MkdirTemp(dir, "making-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Rename(writeTrades(b, tmp, f, benchRows()), p); err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkIngest loads trades into a fresh log per iteration, in a child
// process (the test binary, as TestIngestLargeInputBoundedRSS runs it):
// each format into files (--no-publish), and Parquet end to end with a
// publish to the local prefix. Reports rows/s, rows per CPU-second of the
// child (the box is shared: that says what the code costs whatever the
// neighbours do) and the child's peak RSS. Run with -benchtime 1x -count 3.
func BenchmarkIngest(b *testing.B) {
	for _, tc := range []struct {
		name    string
		f       source.Format
		publish bool
	}{
		{"parquet", source.Parquet, false},
		{"arrow", source.ArrowFile, false},
		{"arrows", source.ArrowStream, false},
		{"ndjson", source.NDJSON, false},
		{"csv", source.CSV, false},
		{"parquet+publish", source.Parquet, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			src := benchSource(b, tc.f)
			st, err := os.Stat(src)
			if err != nil {
				b.Fatal(err)
			}
			var rows int64
			var cpu time.Duration
			var rss int64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				f := tradesLog(b)
				b.StartTimer()
				res, ru := ingestChild(b, f.root, src, tc.f, tc.publish)
				rows += res.Rows
				cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
				rss = max(rss, ru.Maxrss<<10) // KiB on Linux
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(rows)/cpu.Seconds(), "rows/cpu-s")
			b.ReportMetric(float64(rss>>20), "peak-RSS-MiB")
			b.ReportMetric(float64(st.Size())/float64(benchRows()), "src-B/row")
		})
	}
}

// ingestChild loads src into the stream under root in a child process
// and returns what it loaded and its resource usage.
func ingestChild(tb testing.TB, root, src string, f source.Format, publish bool) (lifecycle.Ingested, *syscall.Rusage) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=ingest-large", rootEnv+"="+root, ingestFilesEnv+"="+src,
		ingestFormatEnv+"="+string(f), ingestPublishEnv+"="+strconv.FormatBool(publish))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		tb.Fatalf("the ingest child: %v\n%s", err, errOut.Bytes())
	}
	var res lifecycle.Ingested
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		tb.Fatalf("the ingest child printed %q: %v", out.Bytes(), err)
	}
	return res, cmd.ProcessState.SysUsage().(*syscall.Rusage)
}

const (
	ingestFormatEnv  = "LIFECYCLE_TEST_INGEST_FORMAT"  // the child's source format; parquet when unset
	ingestPublishEnv = "LIFECYCLE_TEST_INGEST_PUBLISH" // "true": the child publishes
)

// TestIngestLargeInputBoundedRSS loads a large Parquet source in a child
// process and checks its peak RSS stays under 1 GiB: the load holds a row
// group at a time, whatever the source's size. 20M rows under
// STREAMCAST_SOAK=full, 1M otherwise.
func TestIngestLargeInputBoundedRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a large source")
	}
	n := testkit.SoakCount(1_000_000, 20_000_000)
	f := tradesLog(t)
	src := writeTrades(t, t.TempDir(), source.Parquet, n)
	res, ru := ingestChild(t, f.root, src, source.Parquet, false)
	if res.Rows != int64(n) {
		t.Fatalf("the child loaded %+v; want %d rows", res, n)
	}
	rss := ru.Maxrss << 10 // KiB on Linux
	t.Logf("%d rows (%d MiB of Parquet) loaded with a peak RSS of %d MiB", n, fileSize(t, src)>>20, rss>>20)
	if rss > 1<<30 {
		t.Errorf("peak RSS %d MiB; want at most 1024 MiB", rss>>20)
	}
}

func fileSize(t *testing.T, p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// runLargeChild is the child of TestIngestLargeInputBoundedRSS and
// BenchmarkIngest.
func runLargeChild() int {
	lay, err := meta.NewLayout(os.Getenv(rootEnv), "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// STREAMCAST_INGEST_CPUPROFILE=FILE profiles the load (a benchmark's
	// -cpuprofile sees only the parent).
	if p := os.Getenv("STREAMCAST_INGEST_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	format := source.Format(os.Getenv(ingestFormatEnv))
	if format == "" {
		format = source.Parquet
	}
	res, err := lifecycle.Ingest(context.Background(), lifecycle.Stream{Layout: lay, Name: stream}, lifecycle.IngestOptions{
		Inputs:    []source.Input{{Path: os.Getenv(ingestFilesEnv), Format: format}},
		NoPublish: os.Getenv(ingestPublishEnv) != "true",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	return 0
}

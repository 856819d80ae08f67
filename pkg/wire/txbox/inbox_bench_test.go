package txbox

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/ndjson"
	"github.com/streamcast/streamcast/pkg/wire"
)

// BenchmarkInbox measures an inbox end to end: rows already in the stream
// are received, landed, and handed out by Next, each processed in its own
// committed transaction (no work of the application's own). Reported in
// rows/s.
func BenchmarkInbox(b *testing.B) {
	for _, kind := range inboxDBs() {
		b.Run(kind.name, func(b *testing.B) {
			db, d, _ := kind.open(b)
			br := startInboxBroker(b, b.TempDir())
			br.publish(0, b.N)
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			in, err := NewInbox(ctx, db, d, br.url(), "bench", InboxOptions{Offset: wire.At(0)})
			if err != nil {
				b.Fatal(err)
			}
			for range b.N {
				if _, _, err := in.Next(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if err := in.Commit(); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			in.Close()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rows/s")
		})
	}
}

// BenchmarkLand measures `tail --into`'s engine sink rows already in
// the stream into a table, against `tail > file` (ndjson.Tail into a
// buffered file) over the same rows. Reported in rows/s.
func BenchmarkLand(b *testing.B) {
	for _, kind := range inboxDBs() {
		b.Run("into-"+kind.name, func(b *testing.B) {
			db, d, _ := kind.open(b)
			br := startInboxBroker(b, b.TempDir())
			br.publish(0, b.N)
			b.ResetTimer()
			start := time.Now()
			res, err := Land(context.Background(), db, d, br.url(), "trades", LandOptions{Offset: wire.At(0), UntilCaughtUp: true})
			elapsed := time.Since(start)
			if err != nil || res.Rows != int64(b.N) {
				b.Fatalf("landed %d of %d rows: %v", res.Rows, b.N, err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rows/s")
		})
	}
	b.Run("tail-to-file", func(b *testing.B) {
		br := startInboxBroker(b, b.TempDir())
		br.publish(0, b.N)
		f, err := os.Create(filepath.Join(b.TempDir(), "out.ndjson"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		w := bufio.NewWriterSize(f, 64<<10)
		b.ResetTimer()
		start := time.Now()
		opts := ndjson.DefaultTailOptions()
		opts.Offset = wire.At(0)
		opts.UntilCaughtUp = true
		res, err := ndjson.Tail(context.Background(), br.url(), w, opts)
		if err == nil {
			err = w.Flush()
		}
		elapsed := time.Since(start)
		if err != nil || res.Rows != int64(b.N) {
			b.Fatalf("tailed %d of %d rows: %v", res.Rows, b.N, err)
		}
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rows/s")
	})
}

// BenchmarkTailOutput measures `tail --cursor F --output FILE`, the
// exactly-once file, over the same rows as BenchmarkLand's tail-to-file:
// the cursor saves (each syncing the file first) at most once a second.
// Reported in rows/s.
func BenchmarkTailOutput(b *testing.B) {
	br := startInboxBroker(b, b.TempDir())
	br.publish(0, b.N)
	dir := b.TempDir()
	c, _, err := ndjson.OpenCursor(filepath.Join(dir, "out.cursor"))
	if err != nil {
		b.Fatal(err)
	}
	o, err := ndjson.OpenOutput(filepath.Join(dir, "out.ndjson"), c, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	b.ResetTimer()
	start := time.Now()
	opts := ndjson.DefaultTailOptions()
	opts.Offset = wire.At(0)
	opts.UntilCaughtUp = true
	opts.Cursor = c
	res, err := ndjson.Tail(context.Background(), br.url(), o, opts)
	elapsed := time.Since(start)
	if err != nil || res.Rows != int64(b.N) {
		b.Fatalf("tailed %d of %d rows: %v", res.Rows, b.N, err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rows/s")
}

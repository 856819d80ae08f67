//go:build linux

package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
)

// BenchmarkRestore restores a stream of the demo trade schema whose table
// holds STREAMCAST_BENCH_ROWS published rows (default 1,000,000) and whose
// WAL replica holds a tenth as many more, on a file:// prefix outside the
// root and on an s3:// one on versitygw. The size is 10M and 1M:
//
//	STREAMCAST_BENCH_ROWS=10000000 go test ./pkg/meta/lifecycle -run '^$' -bench 'Restore/s3' -benchtime 1x
//
// The default is scaled down so it runs in a shared CI minute. Each op
// wipes the root and restores it; the setup (rows appended in 1000-row
// groups straight to the log, published and evicted from the buffer a
// million at a time) is not timed. It reports the split: download (the replica), rebuild (reading
// the table's manifests, then one transaction that records its files,
// drops the buffered rows it holds and sets the fence) and commit (table
// ownership and metadata), in ms per op, and the size of the restored
// buffer.db.
func BenchmarkRestore(b *testing.B) {
	for _, kind := range []string{"file", "s3"} {
		b.Run(kind, func(b *testing.B) { benchRestore(b, kind) })
	}
}

func benchRestore(b *testing.B, kind string) {
	const group, chunk = 1000, 1_000_000
	published := 1_000_000
	if v := os.Getenv("STREAMCAST_BENCH_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < chunk || n%chunk != 0 {
			b.Fatalf("STREAMCAST_BENCH_ROWS=%q: give a whole number of millions of rows", v)
		}
		published = n
	}
	buffered := published / 10
	ctx := context.Background()
	root := b.TempDir()
	prefix := "file://" + b.TempDir()
	var s3cfg warehouse.S3
	if kind == "s3" {
		// litestream's S3 client cannot load a CA bundle; versitygw is
		// plain HTTP.
		b.Setenv("AWS_CA_BUNDLE", "")
		srv := testkit.StartS3(b, nil)
		srv.UseCredentials(b)
		prefix = "s3://" + testkit.Bucket + "/tables"
		s3cfg = warehouse.S3{Endpoint: srv.Endpoint(), Region: testkit.Region, PathStyle: true}
	}
	lay, err := meta.NewLayout(root, prefix)
	if err != nil {
		b.Fatal(err)
	}
	sch := benchSchema(b, config.DemoSchema)
	dir := lay.LogDir(stream, stream)
	if err := os.MkdirAll(lay.StreamDir(stream), 0o755); err != nil {
		b.Fatal(err)
	}
	lg, err := logstore.Create(dir, sch, logstore.Config{Stream: stream, Log: stream, Published: lay.StoredPublished(stream, stream), S3: s3cfg})
	if err != nil {
		b.Fatal(err)
	}
	appendTrades := func(from, n int) {
		batch := make([][]byte, group)
		for i := from; i < from+n; i += group {
			for k := range batch {
				j := i + k
				batch[k] = fmt.Appendf(batch[k][:0], `{"event_ts":%d,"symbol":"BTC-USD","price":%d.5,"amount":0.015,"side":%d,"trade_id":null}`, 1790038800000000+j, 85000+j%1000, j%2)
			}
			mark := logstore.Mark{Publisher: "loader", LastSeq: int64(i + group)}
			mark.LastOffset = mark.LastSeq
			if _, err := lg.Append(ctx, batch, 1790038800000000+int64(i), []logstore.Mark{mark}); err != nil {
				b.Fatal(err)
			}
		}
	}
	for from := 0; from < published; from += chunk {
		appendTrades(from, chunk)
		if _, err := lg.PublishAll(ctx); err != nil {
			b.Fatal(err)
		}
		// As serve's clean pass would: published rows leave the buffer,
		// so buffer.db (and the replica's snapshot of it) stays the size
		// of what is unpublished, not of the stream's history.
		if _, err := lg.Clean(ctx); err != nil {
			b.Fatal(err)
		}
	}
	md, err := meta.New(stream)
	if err != nil {
		b.Fatal(err)
	}
	d, err := meta.DescribeLog(lg, 1)
	if err == nil {
		err = md.AddLog(d, sch)
	}
	if err != nil {
		b.Fatal(err)
	}
	st, err := meta.NewStore(ctx, lay, stream, s3cfg)
	if err == nil {
		_, err = st.Commit(ctx, md)
	}
	if err != nil {
		b.Fatal(err)
	}
	appendTrades(published, buffered)
	tg, err := replica.TargetFor(dir, replica.Destination{})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- replica.Run(rctx, []replica.Target{tg}, replica.Options{SyncInterval: 20 * time.Millisecond}, nil)
	}()
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if p, ok, _ := replica.ReadProgress(dir); ok && p.ShippedEnd > int64(published+buffered) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the replica was not shipped within 5 minutes")
		}
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		b.Fatal(err)
	}
	if err := lg.Close(); err != nil {
		b.Fatal(err)
	}
	s := lifecycle.Stream{Layout: lay, Name: stream, S3: s3cfg}
	var down, rebuild, commit time.Duration
	var size int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if err := os.RemoveAll(filepath.Join(root, stream)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		r, err := lifecycle.Restore(ctx, s, lifecycle.RestoreOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if r.From != lifecycle.FromReplica || r.ReplicaEnd != int64(published+buffered+1) {
			b.Fatalf("restored %+v", r)
		}
		down, rebuild, commit = down+r.Download, rebuild+r.Rebuild, commit+r.Commit
		b.StopTimer()
		if fi, err := os.Stat(filepath.Join(dir, logstore.BufferFile)); err == nil {
			size = fi.Size()
		}
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(down.Milliseconds())/n, "download-ms/op")
	b.ReportMetric(float64(rebuild.Milliseconds())/n, "rebuild-ms/op")
	b.ReportMetric(float64(commit.Milliseconds())/n, "commit-ms/op")
	b.ReportMetric(float64(size)/1e6, "buffer-MB") // the restored buffer.db: about what was downloaded
}

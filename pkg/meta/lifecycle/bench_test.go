//go:build linux

package lifecycle_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
)

// BenchmarkMigrate1MBufferedRows migrates a stream whose log holds
// 1,000,000 rows of the demo trade schema, all still in buffer.db (none
// sealed), to the schema with one more column, on the default
// <root>/published prefix. Each op is one migration; the setup (a fresh
// log per op) is not timed. It reports the split: seal, publish, and the
// rest (fence, create, marks, metadata) in seconds per op.
func BenchmarkMigrate1MBufferedRows(b *testing.B) {
	const rows, group = 1_000_000, 1000
	// The demo schema with one more column.
	v2 := strings.Replace(config.DemoSchema, `"trade_id": {"type": ["string", "null"]}`, `"trade_id": {"type": ["string", "null"]}, "venue": {"type": ["string", "null"]}`, 1)
	if v2 == config.DemoSchema {
		b.Fatal("the demo schema has no trade_id column to add venue after")
	}
	var t Timings
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		root, err := os.MkdirTemp("", "migrate-bench-")
		if err != nil {
			b.Fatal(err)
		}
		lay, err := meta.NewLayout(root, "")
		if err != nil {
			b.Fatal(err)
		}
		v1 := benchSchema(b, config.DemoSchema)
		if err := os.MkdirAll(lay.StreamDir(stream), 0o755); err != nil {
			b.Fatal(err)
		}
		lg, err := logstore.Create(lay.LogDir(stream, stream), v1, logstore.Config{Stream: stream, Log: stream, Published: lay.StoredPublished(stream, stream)})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		batch := make([][]byte, group)
		for n := 0; n < rows; n += group {
			for k := range batch {
				j := n + k
				batch[k] = fmt.Appendf(batch[k][:0], `{"event_ts":%d,"symbol":"BTC-USD","price":%d.5,"amount":0.015,"side":%d,"trade_id":null}`, 1790038800000000+j, 85000+j%1000, j%2)
			}
			if _, err := lg.Append(ctx, batch, 1790038800000000+int64(n), nil); err != nil {
				b.Fatal(err)
			}
		}
		md, err := meta.New(stream)
		if err != nil {
			b.Fatal(err)
		}
		d, err := meta.DescribeLog(lg, 1)
		if err == nil {
			err = md.AddLog(d, v1)
		}
		if err != nil {
			b.Fatal(err)
		}
		st, err := meta.NewStore(ctx, lay, stream, warehouse.S3{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Commit(ctx, md); err != nil {
			b.Fatal(err)
		}
		_ = lg.Close()
		b.StartTimer()

		m, err := lifecycle.Migrate(ctx, lifecycle.Stream{Layout: lay, Name: stream}, lifecycle.Declaration{Schema: benchSchema(b, v2)}, lifecycle.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if m.Seam != rows+1 {
			b.Fatalf("seam %d, want %d", m.Seam, rows+1)
		}
		t.add(m.Timings)
		_ = os.RemoveAll(root)
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(t.Seal.Seconds()/n, "seal-s/op")
	b.ReportMetric(t.Publish.Seconds()/n, "publish-s/op")
	b.ReportMetric((t.Fence+t.Create+t.Marks+t.Metadata).Seconds()/n, "fence+create+marks+metadata-s/op")
	b.ReportMetric(float64(rows)*n/b.Elapsed().Seconds(), "rows/s")
}

// Timings sums lifecycle.Timings over runs.
type Timings struct{ lifecycle.Timings }

func (t *Timings) add(o lifecycle.Timings) {
	t.Seal += o.Seal
	t.Publish += o.Publish
	t.Fence += o.Fence
	t.Create += o.Create
	t.Marks += o.Marks
	t.Metadata += o.Metadata
}

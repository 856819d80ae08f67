package txbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/wire"
)

// BenchmarkOutbox measures the outbox from committed transactions to the
// broker's acknowledgement: b.N rows in transactions of 1 or 100 rows,
// then Flush. It reports rows/s. The broker runs in this process; the
// PostgreSQL server of testkit.StartPostgres runs with fsync off.
func BenchmarkOutbox(b *testing.B) {
	for _, d := range []Dialect{SQLite, Postgres} {
		for _, per := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/rows_per_tx=%d", d, per), func(b *testing.B) {
				db, d := openDB(b, d)
				url := startBroker(b)
				o := newOutbox(b, db, d, url, "bench", OutboxOptions{})
				b.ResetTimer()
				start := time.Now()
				sendRows(b, db, o, 1, b.N, per)
				flush(b, o)
				b.StopTimer()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rows/s")
			})
		}
	}
}

// BenchmarkBarePublisher is the baseline for BenchmarkOutbox: the same rows
// sent by an exactly-once publisher (what `publish --publisher` runs), in
// pipelined frames of 1 or 100 rows, until every one is acknowledged.
func BenchmarkBarePublisher(b *testing.B) {
	for _, per := range []int{1, 100} {
		b.Run(fmt.Sprintf("rows_per_frame=%d", per), func(b *testing.B) {
			ctx := context.Background()
			url := startBroker(b)
			p, err := wire.Publish(ctx, url, wire.PublishOptions{Publisher: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			b.ResetTimer()
			start := time.Now()
			acks := make(chan *wire.Ack, wire.DefaultMaxInFlight)
			errc := make(chan error, 1)
			go func() {
				var err error
				for a := range acks {
					if _, werr := a.Wait(ctx); werr != nil && err == nil {
						err = werr
					}
				}
				errc <- err
			}()
			for n := 1; n <= b.N; n += per {
				var rows [][]byte
				for k := n; k < n+per && k <= b.N; k++ {
					rows = append(rows, []byte(fmt.Sprintf(`{"n":%d}`, k)))
				}
				a, err := p.SubmitBatch(ctx, rows)
				if err != nil {
					b.Fatal(err)
				}
				acks <- a
			}
			close(acks)
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rows/s")
		})
	}
}

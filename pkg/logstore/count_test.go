package logstore

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"testing"
)

// countByScan is the truth CountRows must match: the rows a scan of
// [from, to), clipped to the extent, yields.
func countByScan(t testing.TB, l *Log, from, to int64) int64 {
	t.Helper()
	earliest, end, err := l.Extent(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	from, to = max(from, earliest), min(to, end)
	if from >= to {
		return 0
	}
	return int64(len(scanAll(t, l, from, to)))
}

func TestCountRowsMatchesTheRowsEveryTierHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := tierConfig()
	cfg.Start = 101
	cfg.TargetFileBytes = 1 // every file is finished: publish and clean take them
	cfg.StagingMaxBytes = 1
	l := createLog(t, mustCompile(t, tradeSchema), cfg)
	exp := expectation{}
	appendTrades(t, l, exp, 30, 10) // [101,401)
	if _, err := l.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	appendTrades(t, l, exp, 30, 10) // [401,701)
	if _, err := l.Seal(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(ctx); err != nil { // local files of the published part go
		t.Fatal(err)
	}
	appendTrades(t, l, exp, 10, 10) // [701,801), buffered
	st, _ := l.Status(ctx)
	if st.PublishedFiles == 0 || st.LocalFiles == 0 || st.BufferedRows == 0 {
		t.Fatalf("the log does not hold rows in all three tiers: %+v", st)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(what string) {
		t.Helper()
		for i := range 200 {
			from := rng.Int64N(900)
			to := from + rng.Int64N(900-from+1)
			if i == 0 {
				from, to = 0, 1<<40
			}
			got, err := l.CountRows(ctx, from, to)
			if err != nil {
				t.Fatal(err)
			}
			if want := countByScan(t, l, from, to); got != want {
				t.Fatalf("%s: CountRows(%d, %d) = %d; a scan yields %d rows", what, from, to, got, want)
			}
		}
	}
	check("three tiers")
	if err := l.SetFloor(ctx, 333); err != nil {
		t.Fatal(err)
	}
	check("above the floor")
	if n, _ := l.CountRows(ctx, 0, 333); n != 0 {
		t.Fatalf("CountRows below the floor = %d, want 0", n)
	}

	// A hole (restore's fence) is subtracted wherever it lies.
	if err := l.writeTx(ctx, func(c *sql.Conn) error {
		_, err := c.ExecContext(ctx, `INSERT INTO holes(start_offset, end_offset) VALUES (750, 760)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n, _ := l.CountRows(ctx, 740, 770); n != 20 {
		t.Fatalf("CountRows(740, 770) across the hole [750,760) = %d, want 20", n)
	}
}

func TestCountRowsReadsRecordsOneByOneWhenATierHasAGap(t *testing.T) {
	for _, published := range []bool{false, true} {
		t.Run(fmt.Sprintf("published=%v", published), func(t *testing.T) {
			ctx := context.Background()
			l := createLog(t, mustCompile(t, tradeSchema), tierConfig())
			exp := expectation{}
			appendTrades(t, l, exp, 40, 10)
			if _, err := l.Seal(ctx, true); err != nil {
				t.Fatal(err)
			}
			if published {
				if _, err := l.Publish(ctx, true); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := l.Evict(ctx); err != nil {
				t.Fatal(err)
			}
			files := localRanges(t, l)
			if len(files) < 3 {
				t.Fatalf("want 3 files or more, have %d", len(files))
			}
			// Take a middle file's record out: the local tier now has a
			// gap, which the published table fills when it holds the rows.
			mid := files[len(files)/2]
			if err := l.writeTx(ctx, func(c *sql.Conn) error {
				_, err := c.ExecContext(ctx, `DELETE FROM files WHERE start_offset = ?`, mid.start)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			for _, r := range [][2]int64{{1, 401}, {mid.start - 3, mid.end + 3}, {mid.start + 1, mid.end - 1}, {1, mid.start + 1}} {
				want := r[1] - r[0]
				if !published {
					want -= max(0, min(r[1], mid.end)-max(r[0], mid.start))
				}
				if got, err := l.CountRows(ctx, r[0], r[1]); err != nil || got != want {
					t.Fatalf("CountRows(%d, %d) with [%d,%d) missing locally = %d, %v; want %d", r[0], r[1], mid.start, mid.end, got, err, want)
				}
			}
		})
	}
}

// fileRecords gives l n local file records of per rows each from offset
// 1 and the first half of them again as published records, written
// straight into buffer.db: the records are what CountRows reads.
func fileRecords(tb testing.TB, l *Log, n, per int64) {
	ctx := context.Background()
	err := l.writeTx(ctx, func(c *sql.Conn) error {
		for i := range n {
			s, e := 1+i*per, 1+(i+1)*per
			_, err := c.ExecContext(ctx, `INSERT INTO files(start_offset, end_offset, name, row_count, arrow_bytes, json_bytes, file_bytes, min_ts, max_ts, stats, sealed_us)
				VALUES (?, ?, ?, ?, 0, 0, 0, ?, ?, '{}', 0)`, s, e, fmt.Sprintf("%d-%d-0000000000000000.parquet", s, e), per, s, e-1)
			if err != nil {
				return err
			}
			if i < n/2 {
				_, err = c.ExecContext(ctx, `INSERT INTO published(start_offset, end_offset, name, path, row_count, file_bytes, min_ts, max_ts, stats, published_us)
					VALUES (?, ?, ?, ?, ?, 0, ?, ?, '{}', 0)`, s, e, "x", fmt.Sprintf("p/%d", s), per, s, e-1)
				if err != nil {
					return err
				}
			}
		}
		_, err := c.ExecContext(ctx, `UPDATE meta SET v = ? WHERE k = 'next_offset'`, 1+n*per)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
}

func BenchmarkCountRows(b *testing.B) {
	ctx := context.Background()
	l := createLog(b, schemaAny(), Config{})
	const n, per = 10_000, 100
	fileRecords(b, l, n, per)
	for _, r := range []struct {
		name     string
		from, to int64
	}{{"all", 1, 1 + n*per}, {"partial", 12_345, 765_432}} {
		b.Run(r.name, func(b *testing.B) {
			for b.Loop() {
				got, err := l.CountRows(ctx, r.from, r.to)
				if err != nil || got != r.to-r.from {
					b.Fatalf("CountRows = %d, %v; want %d", got, err, r.to-r.from)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/count")
		})
	}
}

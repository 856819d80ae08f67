package logstore

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

var benchGroups = []int{1, 10, 100, 1000}

// tradeRows returns n canonical trade rows.
func tradeRows(tb testing.TB, n int) [][]byte {
	sch := mustCompile(tb, tradeSchema)
	raw := make([][]byte, n)
	for i := range raw {
		raw[i] = tradeRow(i)
	}
	return canonical(tb, sch, raw)
}

func reportRows(b *testing.B, rowsPerOp int) {
	b.ReportMetric(float64(b.N)*float64(rowsPerOp)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkAppend measures committed rows per second through Append, one
// group (one transaction, one fsync) per operation.
func BenchmarkAppend(b *testing.B) {
	for _, g := range benchGroups {
		b.Run(fmt.Sprintf("group=%d", g), func(b *testing.B) {
			l := createLog(b, mustCompile(b, tradeSchema), Config{})
			rows := tradeRows(b, g)
			ctx := context.Background()
			cpu0 := processCPU(b)
			b.ResetTimer()
			for b.Loop() {
				if _, err := l.Append(ctx, rows, 1, nil); err != nil {
					b.Fatal(err)
				}
			}
			reportRows(b, g)
			// The wall time is mostly the fsync; the CPU is what a loaded
			// server pays per group.
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU returns the user and system CPU time the process has used.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFloorSQLiteInsert is the floor Append is held against: a bare
// modernc insert loop with buffer.db's pragmas, one SQLite row per row,
// one transaction per group.
func BenchmarkFloorSQLiteInsert(b *testing.B) {
	for _, g := range benchGroups {
		b.Run(fmt.Sprintf("group=%d", g), func(b *testing.B) {
			db, err := sql.Open("sqlite", dsn(filepath.Join(b.TempDir(), "floor.db"), true, 0))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			ctx := context.Background()
			c, err := db.Conn(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if _, err := c.ExecContext(ctx, `CREATE TABLE rows (off INTEGER PRIMARY KEY, ts INTEGER NOT NULL, row BLOB NOT NULL)`); err != nil {
				b.Fatal(err)
			}
			ins, err := c.PrepareContext(ctx, `INSERT INTO rows(off, ts, row) VALUES (?, ?, ?)`)
			if err != nil {
				b.Fatal(err)
			}
			defer ins.Close()
			rows := tradeRows(b, g)
			off := int64(1)
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
					b.Fatal(err)
				}
				for _, r := range rows {
					if _, err := ins.ExecContext(ctx, off, 1, r); err != nil {
						b.Fatal(err)
					}
					off++
				}
				if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
					b.Fatal(err)
				}
			}
			reportRows(b, g)
		})
	}
}

// BenchmarkFloorFdatasync is the disk's floor: append one row's bytes to a
// file and fdatasync it.
func BenchmarkFloorFdatasync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "floor"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	row := tradeRows(b, 1)[0]
	for b.Loop() {
		if _, err := f.Write(row); err != nil {
			b.Fatal(err)
		}
		if err := fdatasync(f); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "syncs/s")
}

// sealedRows is how many rows the seal and scan benchmarks move: about one
// default target (8 MiB of Arrow data) and a half.
const sealedRows = 200_000

// bufferedLog returns a log holding sealedRows trade rows in the buffer,
// in groups of 1,000.
func bufferedLog(b *testing.B) *Log {
	l := createLog(b, mustCompile(b, tradeSchema), Config{})
	rows := tradeRows(b, sealedRows)
	ctx := context.Background()
	for i := 0; i < len(rows); i += 1000 {
		if _, err := l.Append(ctx, rows[i:i+1000], 1, nil); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

// BenchmarkSeal measures rows per second from buffer to fsynced zstd
// Parquet: read, convert, write, record.
func BenchmarkSeal(b *testing.B) {
	l := bufferedLog(b)
	ctx := context.Background()
	files := filepath.Join(l.Dir(), FilesDir)
	for b.Loop() {
		b.StopTimer()
		if _, err := l.wconn.ExecContext(ctx, `DELETE FROM files`); err != nil {
			b.Fatal(err)
		}
		os.RemoveAll(files)
		os.Mkdir(files, 0o755)
		b.StartTimer()
		n, err := l.Seal(ctx, true)
		if err != nil || n != sealedRows {
			b.Fatalf("Seal = %d, %v", n, err)
		}
	}
	reportRows(b, sealedRows)
}

func benchScan(b *testing.B, l *Log) {
	ctx := context.Background()
	var bytes int64
	for b.Loop() {
		n := 0
		err := l.Scan(ctx, 1, sealedRows+1, nil, func(off, ts int64, row []byte) error {
			n++
			bytes += int64(len(row))
			return nil
		})
		if err != nil || n != sealedRows {
			b.Fatalf("Scan = %d rows, %v", n, err)
		}
	}
	reportRows(b, sealedRows)
}

// BenchmarkScanFiles measures rows per second from sealed files to
// canonical bytes.
func BenchmarkScanFiles(b *testing.B) {
	l := bufferedLog(b)
	ctx := context.Background()
	if _, err := l.Seal(ctx, true); err != nil {
		b.Fatal(err)
	}
	if _, err := l.Evict(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	benchScan(b, l)
}

// BenchmarkScanBuffer measures rows per second from buffer.db to
// canonical bytes.
func BenchmarkScanBuffer(b *testing.B) {
	l := bufferedLog(b)
	b.ResetTimer()
	benchScan(b, l)
}

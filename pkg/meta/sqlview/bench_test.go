package sqlview

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamcast/streamcast/internal/rusage"
	"github.com/streamcast/streamcast/pkg/meta/history"
)

// The benchmarks read the trades schema (the demo stream's): 1M rows in 100
// files by default, 10M under STREAMCAST_SOAK=full, as the issue measures.
var tradesSchema = arrow.NewSchema([]arrow.Field{
	fOffset, fTS,
	{Name: "event_ts", Type: arrow.PrimitiveTypes.Int64},
	{Name: "symbol", Type: arrow.BinaryTypes.String},
	{Name: "price", Type: arrow.PrimitiveTypes.Float64},
	{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
	{Name: "side", Type: arrow.PrimitiveTypes.Int64},
}, nil)

const groupByQuery = "SELECT symbol, count(*), sum(amount), avg(price) FROM log GROUP BY symbol"

func tradesRows() (rows, files int) {
	if os.Getenv("STREAMCAST_SOAK") == "full" {
		return 10_000_000, 1000
	}
	return 1_000_000, 100
}

// tradesRecords is the benchmark history, one record per file, built once.
var tradesRecords = sync.OnceValue(func() []arrow.RecordBatch {
	rows, files := tradesRows()
	rng := rand.New(rand.NewPCG(1, 1))
	syms := []string{"BTC-USD", "ETH-USD", "SOL-USD", "ADA-USD", "XRP-USD", "DOGE-USD", "DOT-USD", "LTC-USD"}
	per := rows / files
	recs := make([]arrow.RecordBatch, 0, files)
	off := int64(0)
	for f := 0; f < files; f++ {
		b := array.NewRecordBuilder(memory.DefaultAllocator, tradesSchema)
		for r := 0; r < per; r++ {
			ts := 1_700_000_000_000_000 + off*1000
			b.Field(0).(*array.Int64Builder).Append(off)
			b.Field(1).(*array.Int64Builder).Append(ts)
			b.Field(2).(*array.Int64Builder).Append(ts - int64(rng.IntN(500)))
			b.Field(3).(*array.StringBuilder).Append(syms[rng.IntN(len(syms))])
			b.Field(4).(*array.Float64Builder).Append(80000 + float64(rng.IntN(1_000_000))/100)
			b.Field(5).(*array.Float64Builder).Append(float64(rng.IntN(10_000)) / 1000)
			b.Field(6).(*array.Int64Builder).Append(int64(rng.IntN(2)))
			off++
		}
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	return recs
})

// memTable serves records from memory, projected but never decoded, so a
// benchmark over it measures the virtual table and SQLite alone.
type memTable struct {
	schema *arrow.Schema
	recs   []arrow.RecordBatch
}

func (m *memTable) Schema() *arrow.Schema { return m.schema }

func (m *memTable) Scan(_ context.Context, req history.ScanRequest) (array.RecordReader, error) {
	out := make([]arrow.RecordBatch, 0, len(m.recs))
	var sch *arrow.Schema
	for _, rec := range m.recs {
		if req.Columns == nil {
			rec.Retain()
			out = append(out, rec)
			sch = rec.Schema()
			continue
		}
		var fields []arrow.Field
		var cols []arrow.Array
		for _, name := range req.Columns {
			if i := rec.Schema().FieldIndices(name); len(i) > 0 {
				fields = append(fields, rec.Schema().Field(i[0]))
				cols = append(cols, rec.Column(i[0]))
			}
		}
		sch = arrow.NewSchema(fields, nil)
		out = append(out, array.NewRecordBatch(sch, cols, rec.NumRows()))
	}
	if sch == nil {
		sch = m.schema
	}
	rr, err := array.NewRecordReader(sch, out)
	for _, r := range out {
		r.Release()
	}
	return rr, err
}

func benchQuery(b *testing.B, tbl Table, q string) {
	v, err := Open(context.Background(), tbl, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	rows, _ := tradesRows()
	cpu0, _ := rusage.Self()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := v.Query(context.Background(), q)
		if err != nil {
			b.Fatal(err)
		}
		for r.Next() {
		}
		if err := r.Err(); err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
	reportRates(b, rows, cpu0)
}

// reportRates reports rows/s and, as the machine the figures come from is
// shared, rows per second of this process's CPU time since cpu0: the
// figure that does not depend on the neighbours.
func reportRates(b *testing.B, rows int, cpu0 float64) {
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	if cpu1, _ := rusage.Self(); cpu1 > cpu0 {
		b.ReportMetric(float64(rows)*float64(b.N)/(cpu1-cpu0), "rows/cpu-s")
	}
}

// BenchmarkGroupBy is the query over Parquet files (decode
// included) and over records in memory (the virtual table and SQLite
// alone).
func BenchmarkGroupBy(b *testing.B) {
	files := benchFiles(b)
	b.Run("parquet", func(b *testing.B) { benchQuery(b, files, groupByQuery) })
	// The same with SQLite's sorter doing the grouping (a COLLATE keeps
	// log from returning rows grouped): what the ordered scan saves.
	b.Run("parquet-sqlite-sorter", func(b *testing.B) { benchQuery(b, files, groupByQuery+" COLLATE BINARY") })
	b.Run("memory", func(b *testing.B) {
		benchQuery(b, &memTable{schema: tradesSchema, recs: tradesRecords()}, groupByQuery)
	})
}

// BenchmarkCount is count(*): the scan with the least SQLite work per row.
func BenchmarkCount(b *testing.B) {
	files := benchFiles(b)
	b.Run("parquet", func(b *testing.B) { benchQuery(b, files, "SELECT count(*) FROM log") })
	b.Run("memory", func(b *testing.B) {
		benchQuery(b, &memTable{schema: tradesSchema, recs: tradesRecords()}, "SELECT count(*) FROM log")
	})
}

// BenchmarkPruned is a query whose offset bound selects 1% of the files by
// their statistics; rows/s counts the whole history, so its ratio to
// BenchmarkGroupBy/parquet is the speed-up pruning buys.
func BenchmarkPruned(b *testing.B) {
	rows, _ := tradesRows()
	q := groupByQuery[:len(groupByQuery)-len(" GROUP BY symbol")] + " WHERE streamcast_offset >= " + strconv.Itoa(rows-rows/100) + " GROUP BY symbol"
	benchQuery(b, benchFiles(b), q)
}

// benchFiles writes the trades history as Parquet files under b's temp
// dir, read back in batches of 64k rows as a reader would.
func benchFiles(b *testing.B) *fileTable {
	ft := writeFiles(b, tradesSchema, tradesRecords())
	ft.batchSize = 64 << 10
	return ft
}

// BenchmarkArrowAggregate answers the GROUP BY query in Go straight over
// the same scan, without SQLite: the ceiling of a fast path for simple
// aggregates, to weigh against BenchmarkGroupBy/parquet. (Not a product
// path: SQLite's sum and avg semantics, such as its compensated float
// sum, would have to be matched first.)
func BenchmarkArrowAggregate(b *testing.B) {
	files := benchFiles(b)
	rows, _ := tradesRows()
	type agg struct {
		n             int64
		amount, price float64
	}
	cpu0, _ := rusage.Self()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rr, err := files.Scan(context.Background(), history.ScanRequest{Columns: []string{"symbol", "amount", "price"}})
		if err != nil {
			b.Fatal(err)
		}
		groups := map[string]*agg{}
		for rr.Next() {
			rec := rr.RecordBatch()
			var sym *array.String
			var amount, price *array.Float64
			for k, f := range rec.Schema().Fields() {
				switch f.Name {
				case "symbol":
					sym = rec.Column(k).(*array.String)
				case "amount":
					amount = rec.Column(k).(*array.Float64)
				case "price":
					price = rec.Column(k).(*array.Float64)
				}
			}
			for r := 0; r < int(rec.NumRows()); r++ {
				g := groups[sym.Value(r)]
				if g == nil {
					g = &agg{}
					groups[sym.Value(r)] = g
				}
				g.n++
				g.amount += amount.Value(r)
				g.price += price.Value(r)
			}
		}
		if err := rr.Err(); err != nil {
			b.Fatal(err)
		}
		rr.Release()
	}
	reportRates(b, rows, cpu0)
}

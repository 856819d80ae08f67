package schema

import (
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// tradeSchema is the six-column trade row the benchmarks use.
const tradeSchema = `{"type":"object","properties":{
	"event_ts":{"type":"integer"},
	"symbol":{"type":"string"},
	"price":{"type":"number"},
	"amount":{"type":"number"},
	"side":{"type":"integer","format":"int32"},
	"trade_id":{"type":"string"}},
	"required":["event_ts","symbol","price","amount","side","trade_id"]}`

// tradeRow is the i-th trade of a plausible feed, as a publisher sends it.
func tradeRow(i int) []byte {
	b := []byte(`{"event_ts":`)
	b = strconv.AppendInt(b, 1735689600000000+int64(i)*1375, 10)
	b = append(b, `,"symbol":"BTC-USD","price":`...)
	// Publishers print floats in shortest form, as their JSON encoders do.
	b = strconv.AppendFloat(b, float64(8556512+i%997)/100, 'f', -1, 64)
	b = append(b, `,"amount":`...)
	b = strconv.AppendFloat(b, float64(12*(1+i%50))/1e5, 'f', -1, 64)
	b = append(b, `,"side":`...)
	b = strconv.AppendInt(b, int64(i%2), 10)
	b = append(b, `,"trade_id":"`...)
	b = strconv.AppendInt(b, 700000000+int64(i), 10)
	return append(b, `"}`...)
}

// perRow reports wall and CPU nanoseconds per row; start is cpuNanos() when
// the timed loop began.
func perRow(b *testing.B, start int64, rows int) {
	n := float64(b.N) * float64(rows)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/row")
	if start > 0 {
		b.ReportMetric(float64(cpuNanos()-start)/n, "cpu-ns/row")
	}
}

func mustCompile(tb testing.TB, doc string) *Schema {
	tb.Helper()
	s, err := Compile([]byte(doc))
	if err != nil {
		tb.Fatalf("compile: %v", err)
	}
	return s
}

func BenchmarkDecodeTradeRow(b *testing.B) {
	s := mustCompile(b, tradeSchema)
	rows := make([][]byte, 1024)
	for i := range rows {
		rows[i] = tradeRow(i)
	}
	var r Row
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuNanos()
	for i := 0; i < b.N; i++ {
		if err := s.Decode(&r, rows[i&1023]); err != nil {
			b.Fatal(err)
		}
	}
	perRow(b, cpu, 1)
}

func BenchmarkAppendCanonicalTradeRow(b *testing.B) {
	s := mustCompile(b, tradeSchema)
	rows := make([][]byte, 1024)
	for i := range rows {
		rows[i] = tradeRow(i)
	}
	var dst []byte
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuNanos()
	for i := 0; i < b.N; i++ {
		var err error
		if dst, err = s.AppendCanonical(dst[:0], rows[i&1023]); err != nil {
			b.Fatal(err)
		}
	}
	perRow(b, cpu, 1)
}

// tradeBatch builds a record of n canonical trade rows.
func tradeBatch(tb testing.TB, s *Schema, n int) (arrow.RecordBatch, [][]byte) {
	tb.Helper()
	rb := array.NewRecordBuilder(memory.NewGoAllocator(), s.Arrow())
	defer rb.Release()
	canon := make([][]byte, n)
	var r Row
	for i := 0; i < n; i++ {
		if err := s.Decode(&r, tradeRow(i)); err != nil {
			tb.Fatal(err)
		}
		canon[i] = append([]byte(nil), r.Canonical...)
		if err := s.AppendArrow(rb.Fields(), canon[i]); err != nil {
			tb.Fatal(err)
		}
	}
	return rb.NewRecordBatch(), canon
}

func BenchmarkAppendJSONBatch4096(b *testing.B) {
	s := mustCompile(b, tradeSchema)
	rec, _ := tradeBatch(b, s, 4096)
	defer rec.Release()
	cols := rec.Columns()
	dst := make([]byte, 0, 1<<20)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuNanos()
	for i := 0; i < b.N; i++ {
		dst = dst[:0]
		for j := 0; j < 4096; j++ {
			dst = s.AppendJSON(dst, cols, j)
		}
	}
	perRow(b, cpu, 4096)
}

func BenchmarkAppendArrowTradeRow(b *testing.B) {
	s := mustCompile(b, tradeSchema)
	_, canon := tradeBatch(b, s, 4096)
	rb := array.NewRecordBuilder(memory.NewGoAllocator(), s.Arrow())
	defer rb.Release()
	builders := rb.Fields()
	rb.Reserve(4096)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuNanos()
	for i := 0; i < b.N; i++ {
		if err := s.AppendArrow(builders, canon[i&4095]); err != nil {
			b.Fatal(err)
		}
		if i&4095 == 4095 {
			// Seal the batch, as the log does every few thousand rows,
			// and size the next one up front.
			rb.NewRecordBatch().Release()
			rb.Reserve(4096)
		}
	}
	perRow(b, cpu, 1)
}

// inList is a where= filter on trade_id listing n distinct ids, none of which
// tradeRow(i) carries for small i: the row is checked against every value.
func inList(n int) []byte {
	b := []byte(`{"trade_id":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, 900000000+int64(i), 10)
		b = append(b, '"')
	}
	return append(b, `]}`...)
}

// BenchmarkCompileFilter60kValues is a hostile subscribe's cost: a 60k-value
// membership list, which took 5.2 s of CPU while duplicates were found by a
// scan per value. Bound: well under 100 ms.
func BenchmarkCompileFilter60kValues(b *testing.B) {
	s := mustCompile(b, tradeSchema)
	where := inList(60000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.CompileFilter(where); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMatchFilter16kValues is the cost per committed row of one
// subscriber's 16k-value list, paid under the fan-out lock. Bound: within
// a few times the cost of a one-value filter.
func BenchmarkMatchFilter16kValues(b *testing.B) {
	for _, n := range []int{1, 16384} {
		b.Run("values="+strconv.Itoa(n), func(b *testing.B) {
			s := mustCompile(b, tradeSchema)
			f, err := s.CompileFilter(inList(n))
			if err != nil {
				b.Fatal(err)
			}
			var r Row
			if err := s.Decode(&r, tradeRow(1)); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if f.MatchRow(&r) {
					b.Fatal("matched a row the list does not hold")
				}
			}
		})
	}
}

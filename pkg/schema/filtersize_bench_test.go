package schema

import (
	"strconv"
	"testing"
)

// stringList is a where= filter on column listing n distinct strings of
// about ten bytes: the shape of the 64 KiB filters one subscriber may send.
func stringList(column string, n, salt int) []byte {
	b := []byte(`{"` + column + `":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `"u`...)
		b = strconv.AppendInt(b, int64(salt)*1_000_000+int64(i)+10_000_000, 10)
		b = append(b, '"')
	}
	return append(b, `]}`...)
}

// BenchmarkMatchAnyFilter5kStrings is the cost per committed row of one
// subscriber's 5,000-string list on a stream without a schema, paid under
// the fan-out lock: such a row is matched from its raw JSON.
func BenchmarkMatchAnyFilter5kStrings(b *testing.B) {
	for _, n := range []int{1, 5000} {
		b.Run("values="+strconv.Itoa(n), func(b *testing.B) {
			f, err := Any().CompileFilter(stringList("trade_id", n, 1))
			if err != nil {
				b.Fatal(err)
			}
			row := tradeRow(1)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if f.MatchCanonical(row) {
					b.Fatal("matched a row the list does not hold")
				}
			}
		})
	}
}

// BenchmarkMatchArrowFilter16kValues is the cost per row of a replay from
// a Parquet file through a 16k-value list.
func BenchmarkMatchArrowFilter16kValues(b *testing.B) {
	s := mustCompile(b, tradeSchema)
	rec, _ := tradeBatch(b, s, 1024)
	defer rec.Release()
	f, err := s.CompileFilter(inList(16384))
	if err != nil {
		b.Fatal(err)
	}
	cols := rec.Columns()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if f.MatchArrow(cols, i&1023) {
			b.Fatal("matched a row the list does not hold")
		}
		i++
	}
}

// BenchmarkCompileFilter5kStrings is one subscribe's compile of a distinct
// 64 KiB filter, the shape a burst of subscribers sends: what it allocates
// beyond the filter it returns is garbage the collector's headroom must
// cover while they arrive.
func BenchmarkCompileFilter5kStrings(b *testing.B) {
	s := mustCompile(b, tradeSchema)
	where := stringList("trade_id", 5000, 1)
	b.ReportAllocs()
	b.ResetTimer()
	var f *Filter
	for b.Loop() {
		var err error
		if f, err = s.CompileFilter(where); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(f.Size())/float64(len(where)), "held/json")
}

// BenchmarkMatchFanOut1000Filters5kStrings is a commit's fan-out to 1,000
// subscribers each holding a distinct 5,000-string list (80 MB of
// filters, past any cache): what one row costs per subscriber when each
// filter's table is read from memory, not from a cache a benchmark of
// one filter keeps warm.
func BenchmarkMatchFanOut1000Filters5kStrings(b *testing.B) {
	s := mustCompile(b, tradeSchema)
	fs := make([]*Filter, 1000)
	for i := range fs {
		f, err := s.CompileFilter(stringList("trade_id", 5000, i+1))
		if err != nil {
			b.Fatal(err)
		}
		fs[i] = f
	}
	rows := make([]Row, 64)
	for i := range rows {
		if err := s.Decode(&rows[i], tradeRow(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		r := &rows[i%len(rows)]
		for _, f := range fs {
			if f.MatchRow(r) {
				b.Fatal("matched a row the list does not hold")
			}
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(fs)), "ns/filter")
}

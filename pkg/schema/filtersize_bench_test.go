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

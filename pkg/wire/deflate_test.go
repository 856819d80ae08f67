package wire

import (
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"testing"
)

func tradeFrames(n int) [][]byte {
	r := rand.New(rand.NewSource(1))
	syms := []string{"BTC-USD", "ETH-USD", "SOL-USD", "AAPL", "MSFT", "TSLA", "NVDA", "AMZN"}
	var out [][]byte
	ts := int64(1733480000000000)
	for i := 0; i < n; i++ {
		ts += int64(r.Intn(2000))
		row := fmt.Appendf(nil, `{"event_ts":%d,"symbol":"%s","price":%.2f,"amount":%.4f,"side":%d,"trade_id":"t%d"}`,
			ts, syms[r.Intn(len(syms))], 100+r.Float64()*900, r.Float64()*10, r.Intn(2), 1000000+i)
		out = append(out, AppendDataFrame(nil, int64(i+1), ts, row))
	}
	return out
}

// payloadOf splits a server frame into its first byte and payload.
func payloadOf(f []byte) (byte, []byte) {
	switch f[1] & 0x7f {
	case 126:
		return f[0], f[4:]
	case 127:
		return f[0], f[10:]
	}
	return f[0], f[2:]
}

// TestADeflaterResetAnywhereInflatesWithHistory compresses frames with
// context takeover, resetting the compressor now and then, with some plain
// frames between: an Inflater that keeps its history through all of it
// gets every payload back.
func TestADeflaterResetAnywhereInflatesWithHistory(t *testing.T) {
	frames := tradeFrames(1000)
	d := NewDeflater()
	var in Inflater
	for i, f := range frames {
		if i%97 == 0 {
			d.Reset()
		}
		_, want := payloadOf(f)
		if i%13 == 0 {
			continue // sent plain: it never enters the history
		}
		b0, p := payloadOf(d.AppendFrame(nil, f))
		if b0 != 0xC1 {
			t.Fatalf("frame %d: first byte %#x, want FIN|RSV1|text", i, b0)
		}
		got, err := in.Inflate(p, 0)
		if err != nil || string(got) != string(want) {
			t.Fatalf("frame %d: %v %q", i, err, got)
		}
	}
}

func TestInflateRefusesPastItsLimit(t *testing.T) {
	d := NewDeflater()
	big := TextFrame(make([]byte, 1<<20))
	_, p := payloadOf(d.AppendFrame(nil, big))
	var in Inflater
	if _, err := in.Inflate(p, 1000); !errors.Is(err, ErrInflatedTooBig) {
		t.Fatalf("got %v, want ErrInflatedTooBig", err)
	}
}

// BenchmarkDeflateTradeRow compresses trades rows one message each, with
// context takeover, at DeflateLevel: ns per row, the ratio to the plain
// frame, and the memory one Deflater holds.
func BenchmarkDeflateTradeRow(b *testing.B) {
	frames := tradeFrames(20000)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	d := NewDeflater()
	runtime.ReadMemStats(&m1)
	var plain, packed int64
	var dst []byte
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f := frames[i%len(frames)]
		dst = d.AppendFrame(dst[:0], f)
		plain += int64(len(f))
		packed += int64(len(dst))
	}
	b.ReportMetric(float64(packed)/float64(plain), "ratio")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/1024, "KiB/deflater")
}

package broker

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/rusage"
	"github.com/streamcast/streamcast/pkg/wire"
)

// benchTrade is the i-th row of the compression benchmarks: the trades
// schema with prices, amounts, symbols and ids that vary as a market's do,
// stamped (event_ts) with the time it is handed to the fan-out, in ns.
func benchTrade(r *rand.Rand, i int, now int64) []byte {
	syms := [...]string{"BTC-USD", "ETH-USD", "SOL-USD", "AAPL", "MSFT", "TSLA", "NVDA", "AMZN"}
	return fmt.Appendf(nil, `{"event_ts":%d,"symbol":"%s","price":%.2f,"amount":%.4f,"side":%d,"trade_id":"t%d"}`,
		now, syms[r.Intn(len(syms))], 100+r.Float64()*900, r.Float64()*10, r.Intn(2), 1000000+i)
}

// drain reads c's frames until it has seen n data frames (or the
// connection fails), counting bytes; with inflate it inflates compressed
// ones and records, per frame, now − event_ts.
type drainer struct {
	nc     io.Reader
	frames atomic.Int64
	bytes  atomic.Int64
	inf    wire.Inflater
	lat    []time.Duration
}

func (d *drainer) run(n int64, inflate bool, done func()) {
	defer done()
	br := bufio.NewReaderSize(d.nc, 64<<10)
	var hdr [10]byte
	var p []byte
	for d.frames.Load() < n {
		if _, err := io.ReadFull(br, hdr[:2]); err != nil {
			return
		}
		size := int(hdr[1] & 0x7f)
		hn := 2
		switch size {
		case 126:
			_, _ = io.ReadFull(br, hdr[2:4])
			size, hn = int(binary.BigEndian.Uint16(hdr[2:4])), 4
		case 127:
			_, _ = io.ReadFull(br, hdr[2:10])
			size, hn = int(binary.BigEndian.Uint64(hdr[2:10])), 10
		}
		if cap(p) < size {
			p = make([]byte, size)
		}
		p = p[:size]
		if _, err := io.ReadFull(br, p); err != nil {
			return
		}
		if hdr[0]&0x0f >= 0x8 {
			continue
		}
		d.bytes.Add(int64(hn + size))
		if inflate {
			row := p
			if hdr[0]&0x40 != 0 {
				var err error
				if row, err = d.inf.Inflate(p, 0); err != nil {
					panic(err)
				}
			}
			if ts, ok := findEventTS(row); ok {
				d.lat = append(d.lat, time.Duration(time.Now().UnixNano()-ts))
			}
		}
		d.frames.Add(1)
	}
}

func findEventTS(frame []byte) (int64, bool) {
	const key = `"event_ts":`
	for i := 0; i+len(key) < len(frame); i++ {
		if string(frame[i:i+len(key)]) == key {
			var v int64
			j := i + len(key)
			for ; j < len(frame) && frame[j] >= '0' && frame[j] <= '9'; j++ {
				v = v*10 + int64(frame[j]-'0')
			}
			return v, true
		}
	}
	return 0, false
}

// BenchmarkCompressedFanout delivers trades rows at 20k rows/s (batches of
// 10) to 100 subscribers of a live-only stream: plain, compressing in
// shared groups, and compressing per connection. It reports the process's
// CPU per delivery (99 subscribers only read their sockets in 256 KiB
// reads; one parses, inflates and times every frame), the bytes the
// server wrote per delivered row, the delivery p99 that one subscriber
// saw, and the heap held per subscriber once connected and warmed up.
func BenchmarkCompressedFanout(b *testing.B) {
	const subs, rate, batch = 100, 20000, 10
	for _, mode := range []string{"plain", "shared", "per-connection"} {
		b.Run(mode, func(b *testing.B) {
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			srv := startServer(b, testConfig(b), Options{deflatePerConn: mode == "per-connection"})
			offer := browserOffer
			if mode == "plain" {
				offer = ""
			}
			st := srv.reg.Get("live")
			rows := int64(b.N) * batch
			probe := &drainer{}
			var wg sync.WaitGroup
			var ncs []io.Closer
			for i := range subs {
				c := dialDeflate(b, srv, "/live", offer)
				ncs = append(ncs, c.nc)
				_ = c.nc.SetReadDeadline(time.Time{})
				c.greeting()
				if i == 0 {
					probe.nc = c.br
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					buf := make([]byte, 256<<10)
					for {
						if _, err := c.nc.Read(buf); err != nil {
							return
						}
					}
				}()
			}
			b.Cleanup(func() {
				for _, c := range ncs {
					c.Close()
				}
				wg.Wait()
			})
			// idle reports whether every subscriber's queue is written
			// (a subscriber dropped for falling behind has left).
			idle := func() (bool, int) {
				srv.mu.Lock()
				defer srv.mu.Unlock()
				for c := range srv.conns {
					c.mu.Lock()
					busy := c.out.Len() > 0 || c.writing
					c.mu.Unlock()
					if busy {
						return false, 0
					}
				}
				return true, len(srv.conns)
			}
			waitRows := func(n int64) int {
				for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
					if ok, left := idle(); ok && st.m.FramesDelivered.Load() >= n || ok && left < subs {
						return left
					}
					if time.Now().After(deadline) {
						b.Fatalf("the server wrote %d rows of %d", st.m.FramesDelivered.Load(), n)
					}
				}
			}
			r := rand.New(rand.NewSource(1))
			// Warm up: one delivery makes every group's compressor.
			var pw sync.WaitGroup
			pw.Add(1)
			st.deliver(nil, [][]byte{benchTrade(r, 0, time.Now().UnixNano())}, wire.Null, wire.Null)
			probe.run(1, true, pw.Done)
			waitRows(subs)
			var held runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&held)
			probe.frames.Store(0)
			probe.lat = probe.lat[:0]
			pw.Add(1)
			go probe.run(rows, true, pw.Done)
			sent0 := st.bytesSent.Load()
			cpu0, _ := rusage.Self()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if wait := time.Duration(i) * time.Second * batch / rate; time.Since(start) < wait {
					time.Sleep(wait - time.Since(start))
				}
				now := time.Now().UnixNano()
				group := make([][]byte, batch)
				for j := range group {
					group[j] = benchTrade(r, i*batch+j, now)
				}
				st.deliverStamped(nil, group, wire.Null, wire.Null, now/1000)
			}
			left := waitRows(subs + rows*subs)
			if left == subs {
				pw.Wait()
			}
			b.StopTimer()
			delivered := st.m.FramesDelivered.Load() - subs
			cpu1, _ := rusage.Self()
			sent := st.bytesSent.Load() - sent0
			lat := probe.lat
			slices.Sort(lat)
			b.ReportMetric((cpu1-cpu0)*1e9/float64(delivered), "cpu-ns/delivery")
			b.ReportMetric(float64(sent)/float64(delivered), "B/row")
			b.ReportMetric(float64(subs-left), "dropped")
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			}
			b.ReportMetric(float64(int64(held.HeapInuse)-int64(before.HeapInuse))/subs/1024, "heap-KiB/sub")
		})
	}
}

// BenchmarkCompressedReplay replays 20,000 trades rows to one subscriber,
// plain and compressing, and reports the bytes on the wire per row.
func BenchmarkCompressedReplay(b *testing.B) {
	const n = 20000
	srv := startServer(b, testConfig(b))
	st := srv.reg.Get("trades")
	r := rand.New(rand.NewSource(1))
	// Through the log, as a replay reads it: commit in groups of 100.
	var rows [][]byte
	for i := 0; i < n; i++ {
		rows = append(rows, benchTrade(r, i, 1733480000000000000+int64(i)*1000))
	}
	publishRaw(b, srv, rows)
	for _, mode := range []string{"plain", "compressed"} {
		b.Run(mode, func(b *testing.B) {
			offer := browserOffer
			if mode == "plain" {
				offer = ""
			}
			var bytes int64
			for i := 0; i < b.N; i++ {
				c := dialDeflate(b, srv, "/trades?offset=1", offer)
				c.greeting()
				d := &drainer{nc: c.br}
				var wg sync.WaitGroup
				wg.Add(1)
				d.run(n, false, wg.Done)
				bytes += d.bytes.Load()
				c.nc.Close()
			}
			b.ReportMetric(float64(bytes)/float64(int64(b.N)*n), "B/row")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*n), "ns/row")
		})
	}
	_ = st
}

// publishRaw publishes rows to trades in frames of 100 and waits for the acks.
func publishRaw(b *testing.B, srv *Server, rows [][]byte) {
	ws, _ := mustDial(b, wsURL(srv, "/trades?publish"))
	defer ws.Close()
	sent := 0
	for i := 0; i < len(rows); i += 100 {
		frame := []byte{'['}
		for j, r := range rows[i:min(i+100, len(rows))] {
			if j > 0 {
				frame = append(frame, ',')
			}
			frame = append(frame, r...)
		}
		frame = append(frame, ']')
		if err := ws.WriteMessage(1, frame); err != nil {
			b.Fatal(err)
		}
		sent++
	}
	for range sent {
		if _, _, err := ws.ReadMessage(); err != nil {
			b.Fatal(err)
		}
	}
}

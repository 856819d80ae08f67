package broker

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// BenchmarkEventStreamReplay100k is BenchmarkReplay100k read as Server-Sent
// Events by a Go client: the same 100k rows, the same replay, re-framed as
// events and flushed once per replay chunk.
func BenchmarkEventStreamReplay100k(b *testing.B) {
	cfg := testConfig(b)
	cfg.Streams[0].MaxReplay = nil
	srv := startServer(b, cfg)
	p := dialPublisher(b, srv, "trades")
	publishPipelined(b, p, 1000, 100, 64)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		res := openEvents(b, srv, "/trades?offset=1", nil)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		rows := 0
		for rows < 100000 && sc.Scan() {
			if bytes.HasPrefix(sc.Bytes(), []byte("data: [")) {
				rows++
			}
		}
		if rows < 100000 {
			b.Fatalf("the stream ended after %d rows (%v)", rows, sc.Err())
		}
		res.Body.Close()
	}
	b.ReportMetric(float64(b.N*100000)/time.Since(start).Seconds(), "rows/s")
}

// BenchmarkDeliveryWith100Subscribers measures publish→receive latency for
// 100 subscribers of one stream while a publisher sends 20k rows/s in
// 10-row frames for 5 s, with WebSocket subscribers and with event-stream
// subscribers: the same server, load and clock, so the two p99s compare.
// Each row carries its send time (event_ts, µs); every subscriber times one
// row in ten.
func BenchmarkDeliveryWith100Subscribers(b *testing.B) {
	for _, mode := range []string{"websocket", "sse"} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				p50, p99 := deliveryLatency(b, mode, 100, 20000, 5*time.Second)
				b.ReportMetric(float64(p50.Microseconds())/1e3, "p50-ms")
				b.ReportMetric(float64(p99.Microseconds())/1e3, "p99-ms")
			}
		})
	}
}

func deliveryLatency(b *testing.B, mode string, subscribers, rate int, dur time.Duration) (p50, p99 time.Duration) {
	cfg := testConfig(b)
	cfg.Limits.MaxBacklog = 1 << 20 // the figure is latency; a drop would end the run
	srv := startServer(b, cfg)
	const perFrame = 10
	total := rate * int(dur/time.Second)
	var wg sync.WaitGroup
	samples := make([][]time.Duration, subscribers)
	var received atomic.Int64
	errs := make(chan error, subscribers)
	for i := range subscribers {
		var next func() ([]byte, error)
		if mode == "sse" {
			res := openEvents(b, srv, "/trades", nil)
			sc := bufio.NewScanner(res.Body)
			sc.Buffer(nil, 1<<20)
			next = func() ([]byte, error) {
				for sc.Scan() {
					if l := sc.Bytes(); bytes.HasPrefix(l, []byte("data: [")) {
						return l, nil
					}
				}
				return nil, fmt.Errorf("stream ended: %v", sc.Err())
			}
		} else {
			ws, _ := mustDial(b, wsURL(srv, "/trades"))
			// The frames read straight off the socket, as cheaply as the
			// event lines above: gorilla's reader costs about a
			// microsecond a frame, which at 2M frames/s on this box
			// would time the client, not the server. Nothing but the
			// greeting came before the load, so its buffer is empty.
			br := bufio.NewReaderSize(ws.UnderlyingConn(), 64<<10)
			var payload []byte
			var head [8]byte
			next = func() ([]byte, error) {
				if _, err := io.ReadFull(br, head[:2]); err != nil {
					return nil, err
				}
				n := int(head[1] & 0x7f)
				switch n {
				case 126:
					if _, err := io.ReadFull(br, head[:2]); err != nil {
						return nil, err
					}
					n = int(binary.BigEndian.Uint16(head[:2]))
				case 127:
					if _, err := io.ReadFull(br, head[:8]); err != nil {
						return nil, err
					}
					n = int(binary.BigEndian.Uint64(head[:8]))
				}
				payload = slices.Grow(payload[:0], n)[:n]
				_, err := io.ReadFull(br, payload)
				return payload, err
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, total/10+1)
			for n := 0; n < total; n++ {
				m, err := next()
				if err != nil {
					errs <- err
					return
				}
				if n%10 == 0 {
					mine = append(mine, time.Since(time.UnixMicro(sentAt(m))))
				}
				received.Add(1)
			}
			samples[i] = mine
		}()
	}
	waitFor(b, "every subscriber attached", 20*time.Second, func() bool { return streamStats(srv, "trades").Subscribers == int64(subscribers) })

	p := dialPublisher(b, srv, "trades")
	replies := make(chan error, 1)
	frames := total / perFrame
	go func() {
		for range frames {
			if _, err := p.reply(); err != nil {
				replies <- err
				return
			}
		}
		replies <- nil
	}()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	began := time.Now()
	var row strings.Builder
	for sent := 0; sent < frames; {
		<-tick.C
		owed := int(time.Since(began).Seconds()*float64(rate))/perFrame - sent
		for ; owed > 0 && sent < frames; owed-- {
			row.Reset()
			row.WriteByte('[')
			now := time.Now().UnixMicro()
			for k := range perFrame {
				if k > 0 {
					row.WriteByte(',')
				}
				fmt.Fprintf(&row, `{"event_ts":%d,"symbol":"BTC-USD","price":85000.5,"amount":1.0,"side":%d}`, now, k%2)
			}
			row.WriteByte(']')
			if err := p.ws.WriteMessage(websocket.TextMessage, []byte(row.String())); err != nil {
				b.Fatal(err)
			}
			sent++
		}
	}
	if err := <-replies; err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case err := <-errs:
		b.Fatalf("a subscriber failed after %d of %d deliveries: %v", received.Load(), total*subscribers, err)
	case <-time.After(60 * time.Second):
		b.Fatalf("%d of %d deliveries after 60 s", received.Load(), total*subscribers)
	}
	var all []time.Duration
	for _, s := range samples {
		all = append(all, s...)
	}
	slices.Sort(all)
	return all[len(all)/2], all[len(all)*99/100]
}

// sentAt is the event_ts of a data frame or event line: the row's send
// time in µs.
func sentAt(m []byte) int64 {
	const key = `"event_ts":`
	i := bytes.Index(m, []byte(key))
	if i < 0 {
		return 0
	}
	m = m[i+len(key):]
	j := bytes.IndexByte(m, ',')
	v, _ := strconv.ParseInt(string(m[:j]), 10, 64)
	return v
}

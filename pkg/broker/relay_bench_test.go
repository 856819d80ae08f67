package broker

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// stampedBatch is a frame of n trades whose event_ts is now in µs, so a
// subscriber can tell each row's publish-to-receive latency.
func stampedBatch(n int) []byte {
	now := time.Now().UnixMicro()
	parts := make([]string, n)
	for k := range parts {
		parts[k] = fmt.Sprintf(`{"event_ts":%d,"symbol":"S%d","price":%d.5,"amount":1.0,"side":%d}`, now, k%7, k, k%2)
	}
	return []byte("[" + strings.Join(parts, ",") + "]")
}

// receiveTimes reads n data frames from ws and returns, per frame in
// order, when it arrived and its row's event_ts (µs).
func receiveTimes(b *testing.B, ws *websocket.Conn, n int) (at []time.Time, sent []int64) {
	at, sent = make([]time.Time, 0, n), make([]int64, 0, n)
	key := []byte(`"event_ts":`)
	for len(at) < n {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			b.Error(err)
			return
		}
		now := time.Now()
		i := bytes.Index(msg, key) + len(key)
		j := i
		for j < len(msg) && msg[j] >= '0' && msg[j] <= '9' {
			j++
		}
		v, _ := strconv.ParseInt(string(msg[i:j]), 10, 64)
		at, sent = append(at, now), append(sent, v)
	}
	return at, sent
}

// BenchmarkRelayHopLatency publishes 20k rows/s (20-row frames every ms) to
// an origin for 2 s per iteration, with one live subscriber on the origin
// and one on a durable relay of it, and reports both p99 publish-to-receive
// latencies and the p99 of the extra time each row took through the hop.
// Run it with -benchtime=1x -count 3.
func BenchmarkRelayHopLatency(b *testing.B) {
	origin := startNode(b, originConfig(b))
	up := wsURL(origin, "/trades")
	relay := startRelay(b, relayConfig(b, up, true))
	const rate, per, secs = 20000, 20, 2
	rows := rate * secs
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	var originLat, relayLat, extra []float64 // ms
	for range b.N {
		ows, _ := mustDial(b, up)
		rws, _ := mustDial(b, wsURL(relay, "/trades"))
		var wg sync.WaitGroup
		var oAt, rAt []time.Time
		var oSent []int64
		wg.Add(2)
		go func() { defer wg.Done(); oAt, oSent = receiveTimes(b, ows, rows) }()
		go func() { defer wg.Done(); rAt, _ = receiveTimes(b, rws, rows) }()
		p := dialPublisher(b, origin, "trades")
		replies := make(chan error, 1)
		go func() {
			for range rows / per {
				if _, err := p.reply(); err != nil {
					replies <- err
					return
				}
			}
			replies <- nil
		}()
		tick := time.NewTicker(time.Second / (rate / per))
		for range rows / per {
			<-tick.C
			if err := p.send(string(stampedBatch(per))); err != nil {
				b.Fatal(err)
			}
		}
		tick.Stop()
		if err := <-replies; err != nil {
			b.Fatal(err)
		}
		wg.Wait()
		if len(oAt) != rows || len(rAt) != rows {
			b.Fatalf("received %d on the origin, %d on the relay, of %d", len(oAt), len(rAt), rows)
		}
		for i := range rows {
			sent := time.UnixMicro(oSent[i])
			originLat = append(originLat, ms(oAt[i].Sub(sent)))
			relayLat = append(relayLat, ms(rAt[i].Sub(sent)))
			extra = append(extra, ms(rAt[i].Sub(oAt[i])))
		}
		ows.Close()
		rws.Close()
		p.ws.Close()
	}
	b.ReportMetric(quantile(originLat, 0.99), "p99-origin-ms")
	b.ReportMetric(quantile(relayLat, 0.99), "p99-relay-ms")
	b.ReportMetric(quantile(extra, 0.99), "p99-extra-ms")
	b.ReportMetric(quantile(extra, 0.5), "p50-extra-ms")
}

// BenchmarkRelayFanOut compares the frames per second delivered to 20
// subscribers of an origin with those delivered to 10 subscribers on each
// of two relays of it (all in this one process, on this box's cores),
// while one publisher sends b.N rows (at least 20k) in 100-row frames.
func BenchmarkRelayFanOut(b *testing.B) {
	for _, relays := range []int{0, 2} {
		b.Run(fmt.Sprintf("relays=%d", relays), func(b *testing.B) {
			origin := startNode(b, originConfig(b))
			up := wsURL(origin, "/trades")
			nodes := []*Server{origin}
			if relays > 0 {
				nodes = nil
				for range relays {
					nodes = append(nodes, startRelay(b, relayConfig(b, up, true)))
				}
			}
			const subs = 20
			rows := max(b.N/100*100, 20000)
			var wg sync.WaitGroup
			for i := range subs {
				ws, _ := mustDial(b, wsURL(nodes[i%len(nodes)], "/trades"))
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rows {
						if _, _, err := ws.ReadMessage(); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			p := dialPublisher(b, origin, "trades")
			b.ResetTimer()
			start := time.Now()
			publishPipelined(b, p, rows/100, 100, 64)
			wg.Wait()
			el := time.Since(start)
			b.ReportMetric(float64(rows*subs)/el.Seconds(), "frames/s")
		})
	}
}

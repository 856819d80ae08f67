package wire

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit"
)

// BenchmarkRecv measures the subscriber's receive path: a fake server writes
// pre-encoded frames as fast as the socket takes them (many per write, as the
// broker batches), and the client Recvs them.
func BenchmarkRecv(b *testing.B) {
	var stop atomic.Bool
	frame := AppendFrame(nil, 0, 1790038800124001, []byte(`{"event_ts":1790038800123456,"symbol":"BTC-USD","price":85565.0,"amount":0.015,"side":0}`))
	url := fakeServerB(b, func(c *websocket.Conn) {
		g := Greeting{Stream: "t", EndOffset: 0, Durable: true}
		_ = c.WriteMessage(websocket.TextMessage, g.AppendJSON(nil))
		// Write raw frames (unmasked, server side) in big batches.
		var batch []byte
		for i := 0; i < 256; i++ {
			batch = append(batch, 0x81, byte(len(frame)))
			batch = append(batch, frame...)
		}
		nc := c.NetConn()
		for !stop.Load() {
			if _, err := nc.Write(batch); err != nil {
				return
			}
		}
		testkit.CloseWithCode(c, CloseNormal, "")
	})
	ctx := context.Background()
	s, err := Subscribe(ctx, url+"/t", SubscribeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		stop.Store(true)
		s.Close()
	}()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		s.last, s.next = Null, Null // the fake repeats one offset
		if _, err := s.Recv(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "frames/s")
}

func fakeServerB(b *testing.B, script func(c *websocket.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	up := websocket.Upgrader{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		script(c)
	})}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return "ws://" + ln.Addr().String()
}

// BenchmarkParseFrame measures the split of one data frame, the receive
// path's own CPU beside the socket and the WebSocket framing.
func BenchmarkParseFrame(b *testing.B) {
	for _, tc := range []struct{ name, row string }{
		{"trade", `{"event_ts":1790038800123456,"symbol":"BTC-USD","price":85565.0,"amount":0.015,"side":0}`},
		{"log-line", `{"ts":1790038800123456,"level":"info","msg":"` + strings.Repeat("request served in 3 ms from cache ", 6) + `","host":"web-7"}`},
	} {
		frame := AppendFrame(nil, 1234567, 1790038800124001, []byte(tc.row))
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				if _, _, _, bad := parseFrame(frame); bad != "" {
					b.Fatal(bad)
				}
			}
		})
	}
}

// BenchmarkRecvInflating is BenchmarkRecv with trades rows, plain and
// compressed with context takeover: a raw server answers the handshake
// (granting context takeover to the compressed run) and writes the same
// 256 frames over and over, compressed from a reset each time, so every
// batch inflates whatever the client's history holds. It measures the
// client's own cost of inflating, and the bytes per frame on the wire.
func BenchmarkRecvInflating(b *testing.B) {
	frames := tradeFrames(256)
	for _, compress := range []bool{false, true} {
		name := "plain"
		var batch []byte
		d := NewDeflater()
		for _, f := range frames {
			if compress {
				f = d.AppendFrame(nil, f)
			}
			batch = append(batch, f...)
		}
		ext := ""
		if compress {
			name, ext = "takeover", "permessage-deflate; client_no_context_takeover"
		}
		b.Run(name, func(b *testing.B) {
			url := loopServerB(b, ext, batch)
			ctx := context.Background()
			s, err := Subscribe(ctx, url, SubscribeOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				s.last, s.next = Null, Null // the batches repeat their offsets
				if _, err := s.Recv(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer() // Close waits for a close echo this server never sends
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "frames/s")
			b.ReportMetric(float64(len(batch))/float64(len(frames)), "B/frame")
		})
	}
}

// loopServerB accepts one client, answers its handshake with ext as the
// extension line ("" none), sends a greeting and then batch over and over
// until the client goes.
func loopServerB(b *testing.B, ext string, batch []byte) string {
	g := Greeting{Stream: "t", EndOffset: 0, Durable: true}
	url, _ := oneUpgrade(b, "/t", ext, TextFrame(g.AppendJSON(nil)), func(nc net.Conn) {
		for {
			if _, err := nc.Write(batch); err != nil {
				return
			}
		}
	})
	return url
}

package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/rusage"
	"github.com/streamcast/streamcast/pkg/wire"
)

// publishPipelined sends frames rows-per-frame rows each, keeping up to
// window frames unanswered, and waits for every reply.
func publishPipelined(b *testing.B, p *pubConn, frames, rowsPerFrame, window int) {
	sem := make(chan struct{}, window)
	done := make(chan error, 1)
	go func() {
		for i := 0; i < frames; i++ {
			if _, err := p.reply(); err != nil {
				done <- err
				return
			}
			<-sem
		}
		done <- nil
	}()
	msg := []byte(trade(1))
	if rowsPerFrame > 1 {
		msg = []byte(batch(1, rowsPerFrame))
	}
	for i := 0; i < frames; i++ {
		sem <- struct{}{}
		if err := p.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPublishOneRowFrames is the single-row publish path end to end: a
// real server on 127.0.0.1, its committer fsyncing each group into a real
// buffer.db, one pipelined WebSocket publisher of one-row frames. Beside
// rows/s it reports the process's CPU per row (server and this client
// together: they share the process), the figure a regression of the hot
// path moves first. `streamcast bench` against a served stream gives the
// server's share alone.
func BenchmarkPublishOneRowFrames(b *testing.B) {
	benchOneRowFrames(b, startServer(b, testConfig(b)))
}

// BenchmarkPublishOneRowFramesWire is BenchmarkPublishOneRowFrames through
// the client library, wire.Publisher, with each frame in its own socket
// write (coalesce=0, as a client that does not coalesce) and with bursts
// coalesced (coalesce=1ms, as streamcast bench and publish send): the
// server's reads per burst are what the two differ by.
func BenchmarkPublishOneRowFramesWire(b *testing.B) {
	for _, co := range []time.Duration{0, time.Millisecond} {
		b.Run("coalesce="+co.String(), func(b *testing.B) {
			srv := startServer(b, testConfig(b))
			ctx := context.Background()
			p, err := wire.Publish(ctx, wsURL(srv, "/trades"), wire.PublishOptions{MaxInFlight: 64, Coalesce: co})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			acks := make(chan *wire.Ack, 65)
			failed := make(chan error, 1)
			go func() {
				defer close(failed)
				for a := range acks {
					<-a.Done() // Wait would flush the burst being built
					if _, err := a.Wait(ctx); err != nil {
						failed <- err
						for range acks {
						}
						return
					}
				}
			}()
			row := []byte(trade(1))
			b.ResetTimer()
			start := time.Now()
			cpu0, _ := rusage.Self()
			for i := 0; i < b.N; i++ {
				a, err := p.Submit(ctx, row)
				if err != nil {
					b.Fatal(err)
				}
				acks <- a
			}
			p.Flush()
			close(acks)
			if err := <-failed; err != nil {
				b.Fatal(err)
			}
			cpu1, _ := rusage.Self()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rows/s")
			if cpu1 > 0 {
				b.ReportMetric((cpu1-cpu0)*1e6/float64(b.N), "cpu-µs/row")
			}
		})
	}
}

func BenchmarkPublish8x100RowFrames(b *testing.B) {
	bench8x100(b, startServer(b, testConfig(b)))
}

// benchOneRowFrames publishes b.N single-row frames to srv's trades, 64
// in flight, and reports rows/s.
func benchOneRowFrames(b *testing.B, srv *Server) {
	p := dialPublisher(b, srv, "trades")
	b.ResetTimer()
	start := time.Now()
	cpu0, _ := rusage.Self()
	publishPipelined(b, p, b.N, 1, 64)
	cpu1, _ := rusage.Self()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rows/s")
	if cpu1 > 0 {
		b.ReportMetric((cpu1-cpu0)*1e6/float64(b.N), "cpu-µs/row")
	}
}

// bench8x100 publishes about b.N rows to srv's trades from 8 publishers
// in 100-row frames, 64 in flight each, and reports rows/s.
func bench8x100(b *testing.B, srv *Server) {
	var ps []*pubConn
	for i := 0; i < 8; i++ {
		ps = append(ps, dialPublisher(b, srv, "trades"))
	}
	frames := b.N/800 + 1
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); publishPipelined(b, p, frames, 100, 64) }()
	}
	wg.Wait()
	b.ReportMetric(float64(frames*800)/time.Since(start).Seconds(), "rows/s")
}

func BenchmarkFanOut100(b *testing.B) {
	cfg := testConfig(b)
	cfg.Limits.MaxBacklog = 1 << 20
	srv := startServer(b, cfg)
	const nsubs = 100
	var wg sync.WaitGroup
	rows := (b.N/nsubs/100 + 1) * 100
	for i := 0; i < nsubs; i++ {
		ws, _ := mustDial(b, wsURL(srv, "/trades"))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rows; i++ {
				if _, _, err := ws.ReadMessage(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	p := dialPublisher(b, srv, "trades")
	b.ResetTimer()
	start := time.Now()
	publishPipelined(b, p, rows/100, 100, 64)
	wg.Wait()
	el := time.Since(start)
	b.ReportMetric(float64(rows*nsubs)/el.Seconds(), "frames/s")
	b.ReportMetric(float64(rows)/el.Seconds(), "rows/s")
}

func BenchmarkReplay100k(b *testing.B) {
	cfg := testConfig(b)
	cfg.Streams[0].MaxReplay = nil
	srv := startServer(b, cfg)
	p := dialPublisher(b, srv, "trades")
	publishPipelined(b, p, 1000, 100, 64)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		ws, g := mustDial(b, wsURL(srv, "/trades?offset=1"))
		n := g.Replay.End - g.Replay.Start
		for j := int64(0); j < n; j++ {
			if _, _, err := ws.ReadMessage(); err != nil {
				b.Fatal(err)
			}
		}
		ws.Close()
	}
	b.ReportMetric(float64(b.N*100000)/time.Since(start).Seconds(), "rows/s")
}

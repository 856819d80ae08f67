package control_test

import (
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// acceptedToSucceeded sends one mutation and returns how long its
// operation took from the 202 to succeeded, polled every 200 µs.
func acceptedToSucceeded(b *testing.B, f *fixture, q req) time.Duration {
	return pollOperation(b, f, q, 200*time.Microsecond)
}

// pollOperation is acceptedToSucceeded polling every every.
func pollOperation(b *testing.B, f *fixture, q req, every time.Duration) time.Duration {
	t0 := time.Now()
	hr, _ := http.NewRequest(q.method, f.base+q.path, strings.NewReader(q.body))
	for k, v := range q.hdr {
		hr.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		b.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		b.Fatalf("%s %s: %d", q.method, q.path, res.StatusCode)
	}
	t0 = time.Now()
	loc := res.Header.Get("Location")
	for {
		r, err := http.Get(f.base + loc)
		if err != nil {
			b.Fatal(err)
		}
		var buf strings.Builder
		_, _ = bufCopy(&buf, r)
		switch {
		case strings.Contains(buf.String(), `"status":"succeeded"`):
			return time.Since(t0)
		case strings.Contains(buf.String(), `"status":"failed"`):
			b.Fatalf("operation failed: %s", buf.String())
		}
		time.Sleep(every)
	}
}

func bufCopy(w *strings.Builder, r *http.Response) (int64, error) {
	defer r.Body.Close()
	var p [4096]byte
	var n int64
	for {
		k, err := r.Body.Read(p[:])
		w.Write(p[:k])
		n += int64(k)
		if err != nil {
			return n, nil
		}
	}
}

// BenchmarkOperation measures, for an idle stream, how long a stop, a
// start and a migration take from the 202 to succeeded (maintenance
// children off: a start or stop with children also restarts them).
func BenchmarkOperation(b *testing.B) {
	v1 := tradeSchema
	v2 := `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":"string"},"px":{"type":["number","null"]}},"required":["id","sym"]}`
	for _, kind := range []string{"stop", "start", "migrate", "migrate-in-process"} {
		b.Run(kind, func(b *testing.B) {
			f := start(b)
			if kind == "migrate" {
				f = startMigrationChildren(b) // as streamcast serve migrates
			}
			f.create(b, "idle")
			var total time.Duration
			for i := 0; i < b.N; i++ {
				switch kind {
				case "stop":
					f.setDesired(b, "idle", "serving")
					total += acceptedToSucceeded(b, f, req{"PUT", "/control/v1/streams/idle/desired", `{"state":"stopped"}`, mut(f.etag(b, "idle"))})
				case "start":
					f.setDesired(b, "idle", "stopped")
					total += acceptedToSucceeded(b, f, req{"PUT", "/control/v1/streams/idle/desired", `{"state":"serving"}`, mut(f.etag(b, "idle"))})
				case "migrate", "migrate-in-process":
					if i == 0 {
						f.setDesired(b, "idle", "serving")
					}
					sch := []string{v2, v1}[i%2]
					body := `{"stream_id":"` + f.streamID(b, "idle") + `","schema":` + sch + `}`
					total += acceptedToSucceeded(b, f, req{"POST", "/control/v1/streams/idle/migrations", body, mut(f.etag(b, "idle"))})
				}
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/op-202-to-succeeded")
		})
	}
}

// BenchmarkNeighbourAckDuringMigration reports the p99 of a neighbour's
// publish acks (one row at a time) while another stream migrates back and
// forth, and with nothing happening. "migrating" migrates as streamcast
// serve does, in a child process at low priority (migrator.go);
// "migrating-in-process" runs the same work in the server's process, as
// a server given no streamcast binary does. docs/neighbour-tail.md keeps
// what its figures were traced to and what was tried against them.
func BenchmarkNeighbourAckDuringMigration(b *testing.B) {
	// The next migration starts once the last one is seen done, polled
	// every migratePoll: a caller's pace, not a spin. Polled every 200 µs
	// (as BenchmarkOperation times an operation), the poll's own HTTP
	// requests use about as much of the server's CPU as the migrations.
	const migratePoll = 5 * time.Millisecond
	v1 := tradeSchema
	v2 := `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":"string"},"px":{"type":["number","null"]}},"required":["id","sym"]}`
	// idleP99 is the idle sub-benchmark's p99, once it has run: an ack
	// over twice that is slow by the target. The busy
	// sub-benchmarks count those per migration, a figure a slower
	// migration cannot improve by spreading the same disturbance over
	// more acks, as the p99 of back-to-back migrations can.
	var idleP99 time.Duration
	for _, name := range []string{"idle", "migrating", "migrating-in-process"} {
		busy := name != "idle"
		b.Run(name, func(b *testing.B) {
			f := start(b)
			if name == "migrating" {
				f = startMigrationChildren(b)
			}
			f.create(b, "mig")
			f.setDesired(b, "mig", "serving")
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var migrations atomic.Int64 // done while the acks were timed
			var timing atomic.Bool
			if busy {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						sch := []string{v2, v1}[i%2]
						body := `{"stream_id":"` + f.streamID(b, "mig") + `","schema":` + sch + `}`
						pollOperation(b, f, req{"POST", "/control/v1/streams/mig/migrations", body, mut(f.etag(b, "mig"))}, migratePoll)
						if timing.Load() {
							migrations.Add(1)
						}
					}
				}()
			}
			c, _, err := websocket.DefaultDialer.Dial(f.ws+"/neighbour?publish", nil)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			_, _, _ = c.ReadMessage()
			warmWAL(b, f, c)
			lat := make([]time.Duration, 0, b.N)
			wait0, waitOK := readCPUWait()
			b.ResetTimer()
			t0 := time.Now()
			timing.Store(true)
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				_ = c.WriteMessage(websocket.TextMessage, []byte(`{"id":1,"sym":"n"}`))
				if _, _, err := c.ReadMessage(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			timing.Store(false)
			elapsed := time.Since(t0)
			wait1, _ := readCPUWait()
			close(stop)
			wg.Wait()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			p99 := lat[len(lat)*99/100]
			b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
			if !busy {
				idleP99 = p99
			}
			if waitOK {
				// Per ack, so runs of any -benchtime compare: the server's and
				// this client's threads waiting in the run queue (the worker
				// is another process), and the machine's steal.
				n := float64(b.N)
				b.ReportMetric(float64((wait1.runQueue-wait0.runQueue).Microseconds())/n, "runq-µs/ack")
				b.ReportMetric(float64((wait1.steal-wait0.steal).Microseconds())/n, "steal-µs/ack")
			}
			if n := migrations.Load(); n > 0 {
				b.ReportMetric(float64(n)/elapsed.Seconds(), "migrations/s")
				if idleP99 > 0 {
					slow := len(lat) - sort.Search(len(lat), func(i int) bool { return lat[i] > 2*idleP99 })
					b.ReportMetric(float64(slow)/float64(n), "slow-acks/migration")
				}
			}
		})
	}
}

// warmWAL publishes single-row frames to the neighbour until its
// buffer.db-wal has stopped growing: SQLite has checkpointed it and writes
// it again from the start. A neighbour that has run for a while is in that
// state, where a commit overwrites WAL pages in place. While the WAL still
// grows, every commit changes the file's size, so its fdatasync commits the
// file system's journal as well, and that is not what the benchmark is
// about. Both sub-benchmarks warm the same way.
func warmWAL(b *testing.B, f *fixture, c *websocket.Conn) {
	b.Helper()
	size := func() int64 {
		m, _ := filepath.Glob(filepath.Join(f.root, "neighbour", "*", "buffer.db-wal"))
		if len(m) != 1 {
			b.Fatalf("the neighbour's WAL: found %q", m)
		}
		fi, err := os.Stat(m[0])
		if err != nil {
			b.Fatal(err)
		}
		return fi.Size()
	}
	const batch, maxBatches = 200, 100
	for i, last := 0, int64(-1); ; i++ {
		if i == maxBatches {
			b.Fatalf("the neighbour's WAL still grows after %d publishes (%d bytes)", batch*maxBatches, last)
		}
		for range batch {
			_ = c.WriteMessage(websocket.TextMessage, []byte(`{"id":1,"sym":"n"}`))
			if _, _, err := c.ReadMessage(); err != nil {
				b.Fatal(err)
			}
		}
		n := size()
		if n == last && n > 0 {
			return
		}
		last = n
	}
}

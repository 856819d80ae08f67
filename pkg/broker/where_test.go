package broker

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/wire"
)

// eventTSList is a where= on event_ts listing the values of also, then
// 1, 2, 3, … as many as fit in size bytes of JSON.
func eventTSList(size int, also ...int64) []byte {
	b := []byte(`{"event_ts":[`)
	for _, v := range also {
		b = strconv.AppendInt(b, v, 10)
		b = append(b, ',')
	}
	for v := int64(1); ; v++ {
		s := strconv.FormatInt(v, 10)
		if len(b)+len(s)+3 > size {
			break
		}
		if v > 1 {
			b = append(b, ',')
		}
		b = append(b, s...)
	}
	return append(b, "]}"...)
}

func whereURL(srv *Server, where []byte) string {
	return wsURL(srv, "/trades?where="+url.QueryEscape(string(where)))
}

// TestAWhereOverMaxWhereBytesIsRefusedNamingTheLimit: a filter longer than
// limits.max_where_bytes is a 4400 that names the setting and its value.
func TestAWhereOverMaxWhereBytesIsRefusedNamingTheLimit(t *testing.T) {
	cfg := testConfig(t)
	cfg.Limits.MaxWhereBytes = 1024
	srv := startServer(t, cfg)
	where := eventTSList(2048)
	_, _, err := dial(t, whereURL(srv, where))
	code, reason := closeOf(err)
	if code != wire.CloseBadRequest || !strings.Contains(reason, "limits.max_where_bytes 1024") || !strings.Contains(reason, strconv.Itoa(len(where))+" bytes") {
		t.Fatalf("a %d-byte where= over a 1024-byte limit: close %d %q (%v), want 4400 naming limits.max_where_bytes 1024", len(where), code, reason, err)
	}
	// At the limit it is served.
	mustDial(t, whereURL(srv, eventTSList(1024)))
}

// TestAWhereAtTheLimitIsGreetedHoweverFastKeepaliveTicks: compiling a
// filter must not make its own connection look silent to keepalive. With
// a ping every 50 ms, a subscriber whose 64 KiB filter (about 11,000
// values) took longer than two ticks to compile (while duplicates were
// found by a scan) was dropped without a close frame (1006); now it gets its greeting and the
// rows its filter selects.
func TestAWhereAtTheLimitIsGreetedHoweverFastKeepaliveTicks(t *testing.T) {
	cfg := testConfig(t)
	srv := startServer(t, cfg, Options{PingInterval: 50 * time.Millisecond})
	const base = 1700000000000000 // trade(i)'s event_ts is base+i
	where := eventTSList(cfg.Limits.MaxWhereBytes, base+5, base+10)
	if len(where) < cfg.Limits.MaxWhereBytes-16 {
		t.Fatalf("test filter is %d bytes, want about %d", len(where), cfg.Limits.MaxWhereBytes)
	}
	for k := 0; k < 2; k++ {
		ws, g, err := dial(t, whereURL(srv, where))
		if err != nil {
			code, reason := closeOf(err)
			t.Fatalf("subscribe with a %d-byte where=: %v (close %d %q), want the greeting", len(where), err, code, reason)
		}
		if g.Where == nil {
			t.Fatal("greeting echoes no where=")
		}
		// Read (and so answer pings) from now on.
		rows := make(chan dataFrame, 1)
		go func() {
			defer close(rows)
			if f, err := readFrame(t, ws); err == nil {
				rows <- f
			}
		}()
		// Dialled only now, and read at once: an idle client answers no
		// pings, and keepalive ticks every 50 ms here.
		p := dialPublisher(t, srv, "trades")
		p.roundTrip(batch(k*10, 10))
		p.ws.Close()
		f, ok := <-rows
		if !ok {
			t.Fatal("the subscriber was closed before its filtered row arrived")
		}
		if want := `"event_ts":` + strconv.Itoa(base+max(5, k*10)); !strings.Contains(string(f.Row), want) {
			t.Fatalf("the first row through the filter is %s, want %s", f.Row, want)
		}
		ws.Close()
	}
}

// BenchmarkFanOutBesideAFullWhereFilter measures what one subscriber's
// filter at limits.max_where_bytes (a 64 KiB 'in' list, about 11,000
// values) costs the publisher and the other subscribers: commit → delivery
// to 10 plain subscribers, beside an 11th subscriber whose filter is one
// value or the full list (neither matches, so only the match cost differs).
// Bound: the full list's ns/row within 1.1× the one value's.
func BenchmarkFanOutBesideAFullWhereFilter(b *testing.B) {
	for _, tc := range []struct {
		name  string
		where []byte
	}{
		{"where=one_value", []byte(`{"event_ts":[1]}`)},
		{"where=64KiB", eventTSList(64 << 10)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := testConfig(b)
			cfg.Limits.MaxBacklog = 1 << 20
			srv := startServer(b, cfg)
			mustDial(b, whereURL(srv, tc.where))
			const nsubs = 10
			rows := (b.N/100 + 1) * 100
			var wg sync.WaitGroup
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
			b.ReportMetric(float64(el.Nanoseconds())/float64(rows), "ns/row")
			b.ReportMetric(float64(rows)/el.Seconds(), "rows/s")
		})
	}
}

// symbolList is a where= on symbol listing 5,000 distinct ten-byte strings
// that no other salt's list holds: 65,008 bytes of JSON, about 95 KB once
// URL-encoded, the largest filter the default limits.max_where_bytes lets
// one subscriber send.
func symbolList(salt int) []byte {
	b := make([]byte, 0, 65100)
	b = append(b, `{"symbol":[`...)
	for i := 0; i < 5000; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"%04d-%05d"`, salt%10000, i)
	}
	return append(b, `]}`...)
}

// BenchmarkSubscribeWithADistinct64KiBFilter is what a subscriber that
// sends a filter no one else holds costs the server to take in, through
// the real handler: the request line, its query, the compile and the
// greeting. What it allocates beside the filter it keeps is what a burst
// of such subscribers leaves for the collector, and the RSS a burst peaks
// at grows with it. Run with -memprofile to see where; the client's side
// (building and sending the URL) is in the count too.
func BenchmarkSubscribeWithADistinct64KiBFilter(b *testing.B) {
	srv := startServer(b, testConfig(b))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		u := whereURL(srv, symbolList(i))
		b.StartTimer()
		ws, _ := mustDial(b, u)
		ws.Close()
	}
}

package sqlview

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/internal/waitfor"
	"github.com/streamcast/streamcast/pkg/broker"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/meta/history"
	"github.com/streamcast/streamcast/pkg/wire"
)

const liveStream = "trades"

// liveServer is a real broker with one stream, publishing only when the
// test says so (maintenance off), so the test decides which rows are in
// the tables and which only on the server.
type liveServer struct {
	root, url  string
	pub        *wire.Publisher
	next       int          // the id of the next row sent
	subscribes atomic.Int64 // requests resuming at an offset: the live tail's subscriptions
}

func startLive(t *testing.T) *liveServer { return startLiveReplay(t, nil) }

// startLiveReplay starts the server with the stream's max_replay set
// (nil: the default).
func startLiveReplay(t *testing.T, maxReplay *int64) *liveServer {
	t.Helper()
	s := &liveServer{root: t.TempDir(), next: 1}
	cfg := config.Default()
	cfg.Listen, cfg.Root, cfg.Maintain.Enabled = "127.0.0.1:0", s.root, false
	st := config.DefaultStream(liveStream)
	st.MaxReplay = maxReplay
	st.Schema = config.RawJSON(`{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":"string"}},"required":["id","sym"]}`)
	cfg.Streams = []config.Stream{st}
	srv, _ := brokertest.Serve(t, cfg, broker.Options{Middleware: []broker.Middleware{s.countSubscribes}})
	s.url = "ws://" + srv.Addr().String() + "/" + liveStream
	pub, err := wire.Publish(context.Background(), s.url, wire.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	s.pub = pub
	return s
}

// countSubscribes counts the requests that resume the stream at an
// offset: the live tail's subscriptions (the publisher's carry none).
func (s *liveServer) countSubscribes(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("offset") {
			s.subscribes.Add(1)
		}
		next.ServeHTTP(w, r)
	})
}

// send publishes n rows to the server.
func (s *liveServer) send(t *testing.T, n int) {
	t.Helper()
	var rows [][]byte
	for range n {
		rows = append(rows, fmt.Appendf(nil, `{"id":%d,"sym":"S%d"}`, s.next, s.next%3))
		s.next++
	}
	if _, err := s.pub.SendBatch(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

// publishTables writes every row the server holds to the tables.
func (s *liveServer) publishTables(t *testing.T) {
	t.Helper()
	lay, err := meta.NewLayout(s.root, "")
	if err != nil {
		t.Fatal(err)
	}
	lg, err := logstore.Open(lay.LogDir(liveStream, liveStream), logstore.Maintainer)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	ctx := context.Background()
	if _, err := lg.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
}

func (s *liveServer) opts(maxTail int64) history.Options {
	return history.Options{Root: s.root, Stream: liveStream, Broker: s.url, MaxTail: maxTail}
}

// openLive subscribes a live tail of at most maxTail rows, under a
// context that gives the test 30s.
func (s *liveServer) openLive(t *testing.T, maxTail int64) (context.Context, context.CancelFunc, *history.Live) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	live, err := history.OpenLive(ctx, s.opts(maxTail))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Close() })
	return ctx, cancel, live
}

// ndjsonOf is a refresh's rows as NDJSON.
func ndjsonOf(r Refresh) (string, error) {
	var b strings.Builder
	_, err := Write(&b, r.Rows, FormatNDJSON)
	return b.String(), err
}

const liveQuery = "SELECT sym, count(*) AS n, sum(id) AS s, max(streamcast_offset) AS hi FROM log GROUP BY sym ORDER BY sym"

// TestLiveViewConvergesOnTheOneShotAnswer follows a stream whose newest
// rows are only on the server: the view answers over the published base
// plus the tail held in memory, so a refresh counts rows no table holds
// yet, and once publishing catches up and sending stops, its last answer
// is the one-shot query's over the published tables alone.
func TestLiveViewConvergesOnTheOneShotAnswer(t *testing.T) {
	s := startLive(t)
	s.send(t, 100)
	s.publishTables(t)
	s.send(t, 50) // offsets past the published end: only on the server

	ctx, cancel, live := s.openLive(t, 1000)

	// The answer over rows 1..n, as the one-shot query over a published
	// table of exactly those rows would give it.
	want := func(n int) string {
		var b strings.Builder
		for k := range 3 {
			var cnt, sum, hi int
			for id := 1; id <= n; id++ {
				if id%3 == k {
					cnt, sum, hi = cnt+1, sum+id, max(hi, id)
				}
			}
			fmt.Fprintf(&b, `{"sym":"S%d","n":%d,"s":%d,"hi":%d}`+"\n", k, cnt, sum, hi)
		}
		return b.String()
	}
	stage := 0
	var last string
	var lastEnd int64
	err := Follow(ctx, LivePinner(live), Options{}, liveQuery, 20*time.Millisecond, nil, func(r Refresh) error {
		var err error
		if last, err = ndjsonOf(r); err != nil {
			return err
		}
		lastEnd = r.End
		switch {
		case stage == 0 && r.End == 151:
			// The 50 unpublished rows are in the answer.
			if last != want(150) {
				t.Errorf("consistent to 151 (100 published, 50 in the tail):\n%swant\n%s", last, want(150))
			}
			s.publishTables(t) // the base now covers the tail
			s.send(t, 30)      // and new rows join it
			stage = 1
		case stage == 1 && r.End == 181:
			if last != want(180) {
				t.Errorf("consistent to 181:\n%swant\n%s", last, want(180))
			}
			s.publishTables(t) // publishing catches up; sending has stopped
			stage = 2
		case stage == 2 && r.End == 181:
			// Once more after publishing: the tail rows are dropped and the
			// base alone holds the answer.
			stage = 3
			cancel()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if stage != 3 {
		t.Fatalf("the view stopped at stage %d (consistent to %d) before converging; last answer:\n%s", stage, lastEnd, last)
	}
	r, err := history.Open(context.Background(), history.Options{Root: s.root, Stream: liveStream})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, end := r.Extent(); end != 181 {
		t.Fatalf("the published tables end at %d, want 181", end)
	}
	oneShot := query(t, openView(t, r, Options{}), liveQuery)
	if last != oneShot || last != want(180) {
		t.Fatalf("the live view's last answer\n%sis not the one-shot answer\n%s", last, oneShot)
	}
}

// TestLiveViewStopsWhenTheTailOutgrowsMaxTail checks a view whose tail
// outgrows --max-tail (publishing stalled) ends with a refusal naming the
// bound, after answering only from whole cuts.
func TestLiveViewStopsWhenTheTailOutgrowsMaxTail(t *testing.T) {
	s := startLive(t)
	s.send(t, 10)
	s.publishTables(t)

	ctx, _, live := s.openLive(t, 20)
	sent := false
	err := Follow(ctx, LivePinner(live), Options{}, "SELECT count(*) FROM log", 20*time.Millisecond, nil, func(r Refresh) error {
		if r.End > 11+20 {
			t.Errorf("a refresh consistent to %d holds more than --max-tail 20 rows past the published end 11", r.End)
		}
		if !sent {
			s.send(t, 25) // never published
			sent = true
		}
		return nil
	})
	if !history.IsRefusal(err, history.WhyMaxTail) || !strings.Contains(err.Error(), "--max-tail 20") {
		t.Fatalf("got %v, want the --max-tail 20 refusal", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the view ran out its time instead of stopping at --max-tail")
	}
}

// TestLiveViewCatchesUpAfterATooOldRefusal starts a view whose published
// base ends further back than the server replays (max_replay 16, 50 rows
// only on the server): the subscription is refused with 4416 too_old, and
// once the tables hold those rows it re-pins the base, subscribes where
// they end and the view goes on to the newest row with none missing.
func TestLiveViewCatchesUpAfterATooOldRefusal(t *testing.T) {
	replay := int64(16)
	s := startLiveReplay(t, &replay)
	s.send(t, 100)
	s.publishTables(t)
	s.send(t, 50)

	ctx, cancel, live := s.openLive(t, 1000)
	for s.subscribes.Load() < 2 { // refused once, trying again
		if !waitfor.Sleep(ctx, 5*time.Millisecond) {
			t.Fatal("the live tail never resubscribed after its first subscription")
		}
	}
	s.publishTables(t) // the refused rows are now in the tables
	s.send(t, 10)      // within max_replay of where they end

	want := `{"n":160,"s":12880,"hi":160}` + "\n"
	var last string
	err := Follow(ctx, LivePinner(live), Options{}, "SELECT count(*) AS n, sum(id) AS s, max(streamcast_offset) AS hi FROM log", 20*time.Millisecond, nil, func(r Refresh) error {
		var err error
		if last, err = ndjsonOf(r); err != nil {
			return err
		}
		if r.End == 161 {
			cancel()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if last != want {
		t.Fatalf("after catching up, the view answers\n%swant\n%s", last, want)
	}
}

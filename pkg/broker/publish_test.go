package broker

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/wire"
)

func TestPublishRepliesInSendOrderAndKeepsTheConnection(t *testing.T) {
	srv := startServer(t, testConfig(t))
	p := dialPublisher(t, srv, "trades")
	if !p.g.Durable || !p.g.GroupCommit || p.g.Replay != nil || p.g.EndOffset != 1 || len(p.g.Schema) == 0 {
		t.Fatalf("publisher greeting %+v", p.g)
	}
	frames := []string{
		trade(1),
		`{"event_ts":1,"symbol":"x","price":"high","amount":1,"side":0}`, // wrong type
		batch(2, 3),
		`[]`,
		`"row"`,
		`{"event_ts":1,`,
		`[` + trade(5) + `,{"event_ts":2,"symbol":"x","price":1,"amount":1,"side":0,"colour":"red"}]`, // unknown column in row 1
		`[` + trade(6) + `, 7]`,
		trade(7),
	}
	for _, f := range frames {
		if err := p.send(f); err != nil {
			t.Fatal(err)
		}
	}
	want := []struct {
		ok     []int64
		err    string
		detail string
	}{
		{ok: []int64{1}},
		{err: wire.ReplyRejected, detail: "price"},
		{ok: []int64{2, 3, 4}},
		{err: wire.ReplyBadFrame, detail: "empty list"},
		{err: wire.ReplyBadFrame, detail: "a string"},
		{err: wire.ReplyBadFrame},
		{err: wire.ReplyRejected, detail: "colour"},
		{err: wire.ReplyBadFrame, detail: "a number at position 1"},
		{ok: []int64{5}},
	}
	for i, w := range want {
		r, err := p.reply()
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if r.Error != w.err || !strings.Contains(r.Detail, w.detail) {
			t.Errorf("reply %d to %s: %+v, want error %q with %q", i, frames[i], r, w.err, w.detail)
		}
		if w.ok != nil && !equalInts(r.OK, w.ok) {
			t.Errorf("reply %d: ok %v, want %v", i, r.OK, w.ok)
		}
	}
	// Nothing of the refused frames was committed: offsets stay dense.
	if e := streamStats(srv, "trades").EndOffset; e == nil || *e != 6 {
		t.Fatalf("end_offset %v, want 6", e)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBatchesAreAdjacentWithRacingPublishers(t *testing.T) {
	for _, group := range []bool{true, false} {
		name := "group commit"
		if !group {
			name = "one commit per frame"
		}
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Streams[0].GroupCommit = group
			srv := startServer(t, cfg)
			sub, g := mustDial(t, wsURL(srv, "/trades?offset=0"))
			if g.GroupCommit != group {
				t.Fatalf("greeting group_commit %v", g.GroupCommit)
			}
			const pubs, frames, size = 6, 30, 7
			var wg sync.WaitGroup
			type span struct{ pub, first, n int64 }
			spans := make(chan span, pubs*frames)
			for k := 0; k < pubs; k++ {
				wg.Add(1)
				p := dialPublisher(t, srv, "trades")
				go func(k int) {
					defer wg.Done()
					for i := 0; i < frames; i++ {
						if err := p.send(batch(k*1000000+i*size, size)); err != nil {
							t.Error(err)
							return
						}
					}
					for i := 0; i < frames; i++ {
						r, err := p.reply()
						if err != nil || r.Error != "" || len(r.OK) != size {
							t.Errorf("reply: %+v %v", r, err)
							return
						}
						for j := 1; j < size; j++ {
							if r.OK[j] != r.OK[0]+int64(j) {
								t.Errorf("batch offsets %v are not adjacent", r.OK)
							}
						}
						spans <- span{int64(k), r.OK[0], size}
					}
				}(k)
			}
			wg.Wait()
			close(spans)
			// The subscriber sees each batch's rows adjacent and in order.
			byOffset := map[int64]int64{}
			for s := range spans {
				byOffset[s.first] = s.pub
			}
			total := pubs * frames * size
			var rows []dataFrame
			for len(rows) < total {
				f, err := readFrame(t, sub)
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, f)
			}
			for i := 0; i < total; i += size {
				if _, ok := byOffset[rows[i].Offset]; !ok {
					t.Fatalf("offset %d does not start a batch", rows[i].Offset)
				}
				var first struct {
					EventTS int64 `json:"event_ts"`
				}
				_ = json.Unmarshal(rows[i].Row, &first)
				for j := 1; j < size; j++ {
					var r struct {
						EventTS int64 `json:"event_ts"`
					}
					_ = json.Unmarshal(rows[i+j].Row, &r)
					if r.EventTS != first.EventTS+int64(j) || rows[i+j].Offset != rows[i].Offset+int64(j) {
						t.Fatalf("batch at %d interleaved", rows[i].Offset)
					}
					if rows[i+j].TS != rows[i].TS {
						t.Fatalf("rows of one batch carry different stamps")
					}
				}
			}
		})
	}
}

func TestLiveOnlyStreams(t *testing.T) {
	srv := startServer(t, testConfig(t))
	sub, g := mustDial(t, wsURL(srv, "/live"))
	if g.Durable || g.GroupCommit || g.EndOffset != wire.Null || g.Replay != nil || len(g.Schema) == 0 {
		t.Fatalf("live greeting %+v", g)
	}
	rawSub, g2 := mustDial(t, wsURL(srv, "/raw"))
	if g2.Schema != nil {
		t.Fatalf("raw greeting schema %s", g2.Schema)
	}
	p := dialPublisher(t, srv, "live")
	if r := p.roundTrip(`{"event_ts":1,"symbol":"x","price":"bad","amount":1,"side":0}`); r.Error != wire.ReplyRejected {
		t.Fatalf("live stream with a schema accepted a bad row: %+v", r)
	}
	r := p.roundTrip(batch(1, 2))
	if r.Error != "" || len(r.OK) != 2 || r.OK[0] != wire.Null {
		t.Fatalf("reply %+v", r)
	}
	for i := 0; i < 2; i++ {
		f, err := readFrame(t, sub)
		if err != nil || f.Offset != wire.Null || f.TS == 0 {
			t.Fatalf("frame %+v %v", f, err)
		}
	}
	rp := dialPublisher(t, srv, "raw")
	if r := rp.roundTrip(`{"anything": [1, {"goes": true}]}`); r.Error != "" {
		t.Fatalf("raw stream refused an object: %+v", r)
	}
	if r := rp.roundTrip(`[1]`); r.Error != wire.ReplyBadFrame {
		t.Fatalf("raw stream took a non-object: %+v", r)
	}
	f, err := readFrame(t, rawSub)
	if err != nil || !strings.Contains(string(f.Row), `"goes"`) {
		t.Fatalf("raw frame %+v %v", f, err)
	}
}

func TestWhereFiltersLiveAndReplayAlike(t *testing.T) {
	srv := startServer(t, testConfig(t))
	p := dialPublisher(t, srv, "trades")
	p.roundTrip(batch(0, 10)) // offsets 1..10; side = i%2
	where := "where=%7B%22side%22%3A1%7D"
	sub, g := mustDial(t, wsURL(srv, "/trades?offset=1&"+where))
	if string(g.Where) != `{"side":1}` || g.Replay == nil || *g.Replay != (wire.Range{Start: 1, End: 11}) {
		t.Fatalf("greeting where %s replay %v", g.Where, g.Replay)
	}
	live, _ := mustDial(t, wsURL(srv, "/trades?"+where))
	p.roundTrip(batch(10, 10)) // offsets 11..20
	var got []int64
	for len(got) < 10 {
		f, err := readFrame(t, sub)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f.Offset)
	}
	for i, o := range got {
		if o != int64(2+2*i) { // side 1 rows: i odd → offset i+1 even
			t.Fatalf("filtered offsets %v", got)
		}
	}
	for i := 0; i < 5; i++ {
		f, err := readFrame(t, live)
		if err != nil || f.Offset != int64(12+2*i) {
			t.Fatalf("live filtered frame %+v %v", f, err)
		}
	}
}

// publisherOf returns the server side of the one publisher connected to
// stream.
func publisherOf(t *testing.T, srv *Server, stream string) *publisher {
	t.Helper()
	st := srv.reg.Get(stream)
	for _, c := range st.life.Conns() {
		if c.pub != nil {
			return c.pub
		}
	}
	t.Fatalf("no publisher on %s", stream)
	return nil
}

// TestMaxInFlightStopsReadingThePublisher: a publisher that sends frames
// faster than they are answered is owed at most max_in_flight replies at
// once, because the server stops reading its socket at the bound (a frame
// read is a reply owed); nothing is lost meanwhile.
func TestMaxInFlightStopsReadingThePublisher(t *testing.T) {
	cfg := testConfig(t)
	cfg.Limits.MaxInFlight = 4
	srv := startServer(t, cfg)
	p := dialPublisher(t, srv, "trades")
	pub := publisherOf(t, srv, "trades")
	most := 0 // the most replies owed at once; guarded by pub.mu, which the hook holds
	pub.mu.Lock()
	pub.owedHook = func(owed int) { most = max(most, owed) }
	pub.mu.Unlock()
	// All frames at once, before reading any reply: the server reads them
	// much faster than it commits them, so only the bound keeps it from
	// owing a reply for each.
	const n = 200
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if err := p.send(trade(i)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := 0; i < n; i++ {
		r, err := p.reply()
		if err != nil || r.Error != "" || r.OK[0] != int64(i+1) {
			t.Fatalf("reply %d: %+v %v", i, r, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	pub.mu.Lock()
	peak := most
	pub.mu.Unlock()
	switch max := cfg.Limits.MaxInFlight; {
	case peak > max:
		t.Fatalf("the server owed %d replies at once; max_in_flight is %d", peak, max)
	case peak < max:
		t.Fatalf("the server owed at most %d replies at once, so the bound of %d was never reached and this run proves nothing", peak, max)
	}
}

// TestMaxInboundHoldsPublishersBack: publishers racing on one stream never
// have more than max_inbound rows queued for commit at once (a frame larger
// than the bound is admitted alone), and every row still lands.
func TestMaxInboundHoldsPublishersBack(t *testing.T) {
	for _, c := range []struct {
		name       string
		size, want int // rows per frame; the most rows the inbox may hold
	}{
		{"frames under the bound", 3, 9},
		{"frames over the bound go alone", 12, 12},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Limits.MaxInbound = 9
			srv := startServer(t, cfg)
			inboxPeak := followPeak(&srv.reg.Get("trades").inbox)
			const pubs, frames = 4, 30
			var wg sync.WaitGroup
			for k := 0; k < pubs; k++ {
				p := dialPublisher(t, srv, "trades")
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < frames; i++ {
						_ = p.send(batch(i*c.size, c.size))
					}
					for i := 0; i < frames; i++ {
						if r, err := p.reply(); err != nil || r.Error != "" {
							t.Errorf("reply %+v %v", r, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if e := streamStats(srv, "trades").EndOffset; *e != int64(1+pubs*frames*c.size) {
				t.Fatalf("end_offset %d, want %d", *e, 1+pubs*frames*c.size)
			}
			peak := inboxPeak()
			switch {
			case peak > c.want:
				t.Fatalf("%d rows were queued for commit at once; max_inbound is %d and frames hold %d rows", peak, cfg.Limits.MaxInbound, c.size)
			case peak < c.want:
				t.Fatalf("at most %d rows were queued at once, so the bound (%d) was never pressed and this run proves nothing", peak, c.want)
			}
		})
	}
}

func TestBinaryPublishFrameIsABadFrame(t *testing.T) {
	srv := startServer(t, testConfig(t))
	p := dialPublisher(t, srv, "trades")
	if err := p.ws.WriteMessage(websocket.BinaryMessage, []byte(trade(1))); err != nil {
		t.Fatal(err)
	}
	r, err := p.reply()
	if err != nil || r.Error != wire.ReplyBadFrame {
		t.Fatalf("%+v %v", r, err)
	}
	if r := p.roundTrip(trade(1)); r.Error != "" {
		t.Fatalf("connection unusable after a bad frame: %+v", r)
	}
}

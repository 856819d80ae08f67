//go:build linux

package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// TestReloadAddsAStreamWhileAnotherCarriesItsLoad: a stream added by Reload
// starts serving while "trades" carries 8 publishers and 50 subscribers,
// and "trades" shows no gap, no duplicate and no dropped connection.
func TestReloadAddsAStreamWhileAnotherCarriesItsLoad(t *testing.T) {
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1] // trades
	logs := &testkit.SyncBuffer{}
	srv := startServer(t, cfg, Options{Logger: log.New(logs)})

	const subs, pubs, rowsPerFrame, framesAfter = 50, 8, 5, 20
	subConns := make([]*websocket.Conn, subs)
	starts := make([]int64, subs)
	for i := range subConns {
		ws, g := mustDial(t, wsURL(srv, "/trades"))
		subConns[i], starts[i] = ws, g.EndOffset
	}

	// Publishers round-trip frames until told to stop, and stop only once
	// each has sent framesAfter frames after the reload returned.
	var reloaded atomic.Bool
	var wg sync.WaitGroup
	var published atomic.Int64
	for k := range pubs {
		p := dialPublisher(t, srv, "trades")
		wg.Add(1)
		go func() {
			defer wg.Done()
			after := 0
			for i := 0; after < framesAfter; i++ {
				if err := p.send(batch(k*100000+i*rowsPerFrame, rowsPerFrame)); err != nil {
					t.Errorf("publisher %d frame %d: %v", k, i, err)
					return
				}
				r, err := p.reply()
				if err != nil || r.Error != "" || len(r.OK) != rowsPerFrame {
					t.Errorf("publisher %d frame %d: %+v %v", k, i, r, err)
					return
				}
				published.Add(rowsPerFrame)
				if reloaded.Load() {
					after++
				}
			}
		}()
	}
	waitFor(t, "rows to flow", 20*time.Second, func() bool { return published.Load() >= 200 })

	next := cfg
	orders := config.DefaultStream("orders")
	orders.Schema = config.RawJSON(`{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`)
	next.Streams = append(append([]config.Stream(nil), cfg.Streams...), orders)
	if err := srv.Reload(next); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	reloaded.Store(true)
	if st := streamStats(srv, "trades"); st.Subscribers != subs || st.Publishers != pubs {
		t.Errorf("after the reload trades has %d subscribers and %d publishers, want %d and %d", st.Subscribers, st.Publishers, subs, pubs)
	}

	// The added stream serves at once.
	osub, _ := mustDial(t, wsURL(srv, "/orders?offset=0"))
	op := dialPublisher(t, srv, "orders")
	if r := op.roundTrip(`{"id":7}`); r.Error != "" || len(r.OK) != 1 || r.OK[0] != 1 {
		t.Fatalf("publish to the added stream: %+v", r)
	}
	if f, err := readFrame(t, osub); err != nil || f.Offset != 1 {
		t.Fatalf("subscriber of the added stream: %+v %v", f, err)
	}
	if !strings.Contains(logs.String(), "stream added") {
		t.Errorf("the reload did not log the added stream:\n%s", logs)
	}

	wg.Wait()
	end := *streamStats(srv, "trades").EndOffset
	if end != 1+published.Load() {
		t.Fatalf("end_offset %d after %d rows acknowledged", end, published.Load())
	}
	// Every subscriber got every row from where it attached, in order, once,
	// and is still connected.
	var rg sync.WaitGroup
	for i, ws := range subConns {
		rg.Add(1)
		go func() {
			defer rg.Done()
			_ = ws.SetReadDeadline(time.Now().Add(60 * time.Second))
			for want := starts[i]; want < end; want++ {
				f, err := readFrame(t, ws)
				if err != nil {
					t.Errorf("subscriber %d at offset %d: %v", i, want, err)
					return
				}
				if f.Offset != want {
					t.Errorf("subscriber %d got offset %d, want %d (a gap or a duplicate)", i, f.Offset, want)
					return
				}
			}
		}()
	}
	rg.Wait()
	if st := streamStats(srv, "trades"); st.Subscribers != subs || st.Publishers != pubs {
		t.Errorf("at the end trades has %d subscribers and %d publishers, want %d and %d", st.Subscribers, st.Publishers, subs, pubs)
	}
}

// TestReloadStopsARemovedStreamPublishingEveryAckedRowAndReleasingItsLock:
// a stream removed by Reload answers its publishers' queued frames, closes
// its clients with 1001, has every acknowledged row in its published table,
// and releases its log's lock: a second process then opens the log for
// writing (a real child process, so the lock is the flock another process
// would meet).
func TestReloadStopsARemovedStreamPublishingEveryAckedRowAndReleasingItsLock(t *testing.T) {
	cfg := testConfig(t)
	other := config.DefaultStream("other")
	other.Schema = config.RawJSON(config.DemoSchema)
	cfg.Streams = []config.Stream{cfg.Streams[0], other} // trades, other
	logs := &testkit.SyncBuffer{}
	srv := startServer(t, cfg, Options{Logger: log.New(logs)})

	sub, _ := mustDial(t, wsURL(srv, "/trades?offset=0"))
	p := dialPublisher(t, srv, "trades")
	// Frames in flight when the stream stops: the ones read are committed
	// and answered before the 1001, the rest are never read.
	const frames, size = 200, 2
	go func() {
		for i := range frames {
			if p.send(batch(i*size, size)) != nil {
				return
			}
		}
	}()
	acked := 0
	for acked < 20*size {
		r, err := p.reply()
		if err != nil || r.Error != "" {
			t.Fatalf("reply: %+v %v", r, err)
		}
		acked += len(r.OK)
	}

	// The subscriber reads on, so it answers the 1001 while Reload waits.
	subEnd := make(chan int64, 1)
	go func() {
		defer close(subEnd)
		for want := int64(1); ; want++ {
			f, err := readFrame(t, sub)
			if err != nil {
				code, reason := closeOf(err)
				if ga, ok := wire.ParseClose(code, reason).(*wire.GoingAway); !ok || ga.Why != wire.WhyStreamStopped || reason != wire.GoingAwayReason(wire.WhyStreamStopped) {
					t.Errorf("subscriber ended with %v, want 1001 why=%s", err, wire.WhyStreamStopped)
				}
				subEnd <- want
				return
			}
			if f.Offset != want {
				t.Errorf("subscriber got offset %d, want %d", f.Offset, want)
				return
			}
		}
	}()
	reloadErr := make(chan error, 1)
	go func() {
		next := cfg
		next.Streams = []config.Stream{other}
		err := srv.Reload(next)
		reloadErr <- err
		if err != nil {
			// A refused reload stops nothing: end the reads below, which
			// would otherwise wait for a 1001 that never comes.
			_ = p.ws.Close()
		}
	}()

	for {
		r, err := p.reply()
		if err != nil {
			select {
			case rerr := <-reloadErr:
				if rerr != nil {
					t.Fatalf("Reload: %v", rerr)
				}
				reloadErr <- nil
			default:
			}
			code, reason := closeOf(err)
			if ga, ok := wire.ParseClose(code, reason).(*wire.GoingAway); !ok || ga.Why != wire.WhyStreamStopped {
				t.Fatalf("publisher ended with %v, want 1001 why=%s", err, wire.WhyStreamStopped)
			}
			break
		}
		if r.Error != "" {
			t.Fatalf("reply while stopping: %+v", r)
		}
		acked += len(r.OK)
	}
	if err := <-reloadErr; err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if next, ok := <-subEnd; ok && next != int64(acked)+1 {
		t.Fatalf("subscriber got offsets up to %d, %d were acknowledged", next-1, acked)
	}
	if _, _, err := dial(t, wsURL(srv, "/trades")); err == nil {
		t.Fatal("the removed stream still serves")
	} else if code, reason := closeOf(err); code != wire.CloseNoSuchStream || !strings.Contains(reason, "other") {
		t.Fatalf("a connection to the removed stream: %v, want 4404 naming other", err)
	}
	if !strings.Contains(logs.String(), "stream removed") {
		t.Errorf("the reload did not log the removed stream:\n%s", logs)
	}

	// Every acknowledged row is in the published table, exactly once.
	checkEveryAckedRow(t, readPublished(t, filepath.Join(cfg.Root, meta.PublishedDir), nil, "trades"), acked)

	// The lock is released: another process takes the log as its writer.
	second := cfg
	second.Streams = cfg.Streams[:1]
	ch := startChild(t, second)
	_, g := mustDial(t, "ws://"+ch.addr+"/trades")
	if g.EndOffset != int64(acked)+1 {
		t.Fatalf("the second process reads end_offset %d, want %d", g.EndOffset, acked+1)
	}

	// The stream that stayed still serves.
	op := dialPublisher(t, srv, "other")
	if r := op.roundTrip(trade(1)); r.Error != "" {
		t.Fatalf("the remaining stream: %+v", r)
	}
}

// TestReloadKeepsAChangedStreamAsItWasAndSaysWhy: a durable stream whose
// schema changed keeps serving as it was; the log line says why, and
// names migrate, the way to move it to the new schema.
func TestReloadKeepsAChangedStreamAsItWasAndSaysWhy(t *testing.T) {
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1]
	logs := &testkit.SyncBuffer{}
	srv := startServer(t, cfg, Options{Logger: log.New(logs)})
	next := cfg
	changed := cfg.Streams[0]
	changed.Schema = config.RawJSON(`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`)
	next.Streams = []config.Stream{changed}
	next.Listen = "127.0.0.1:1"
	if err := srv.Reload(next); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	out := logs.String()
	for _, want := range []string{"keeps serving as it was", "schema", "stop the server and run streamcast migrate trades", "listen changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(trade(1)); r.Error != "" {
		t.Fatalf("the stream no longer takes rows of its old schema: %+v", r)
	}
	bad := next
	bad.Streams = nil
	if err := srv.Reload(bad); err == nil {
		t.Fatal("Reload took a config with no streams")
	}
	if st := streamStats(srv, "trades"); st.Name != "trades" {
		t.Fatal("a refused reload stopped a stream")
	}
}

// TestReloadGivesTheMaintenanceChildrenTheNewSetOfLogs: the children
// running take an added stream's log without a restart (its rows get
// sealed by the same child), are restarted without a removed one, and the
// other stream's publisher is never held back meanwhile.
func TestReloadGivesTheMaintenanceChildrenTheNewSetOfLogs(t *testing.T) {
	exe := streamcastExe(t)
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1] // trades
	cfg.Maintain = maintainOf(map[logstore.Role]time.Duration{logstore.RoleSeal: 100 * time.Millisecond}, time.Second)
	logs := &testkit.SyncBuffer{}
	srv := startServer(t, cfg, Options{Executable: exe, Logger: log.New(logs)})
	before := srv.Stats().Children
	if len(before) != 1 || before[0].PID == nil {
		t.Fatalf("children %+v", before)
	}

	// trades keeps publishing, one round trip at a time, through both reloads.
	stop := make(chan struct{})
	var sent atomic.Int64
	pubDone := make(chan struct{})
	p := dialPublisher(t, srv, "trades")
	go func() {
		defer close(pubDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := p.send(trade(i)); err != nil {
				t.Errorf("trades publisher: %v", err)
				return
			}
			if r, err := p.reply(); err != nil || r.Error != "" {
				t.Errorf("trades publisher: %+v %v", r, err)
				return
			}
			sent.Add(1)
		}
	}()

	orders := config.DefaultStream("orders")
	orders.Schema = config.RawJSON(config.DemoSchema)
	added := cfg
	added.Streams = []config.Stream{cfg.Streams[0], orders}
	if err := srv.Reload(added); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	// Adding a log restarts no child: the one running takes it.
	after := srv.Stats().Children
	if len(after) != 1 || after[0].PID == nil || *after[0].PID != *before[0].PID || !after[0].Ready {
		t.Fatalf("children after adding a stream %+v, want the same ready seal child (pid %d)", after, *before[0].PID)
	}
	op := dialPublisher(t, srv, "orders")
	if r := op.roundTrip(batch(0, 10)); r.Error != "" {
		t.Fatalf("publish to orders: %+v", r)
	}
	waitFor(t, "the seal child to seal the added stream's rows", 20*time.Second, func() bool {
		s := streamStats(srv, "orders")
		return s.LocalFiles != nil && *s.LocalFiles >= 1
	})

	// Removing it: every acknowledged row is published (serve's own flush:
	// no child publishes here), and the children no longer name its log.
	mark := sent.Load()
	if err := srv.Reload(cfg); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	checkEveryAckedRow(t, readPublished(t, filepath.Join(cfg.Root, meta.PublishedDir), nil, "orders"), 10)
	kids := srv.Stats().Children
	if len(kids) != 1 || kids[0].PID == nil || !kids[0].Ready {
		t.Fatalf("children after removing a stream %+v", kids)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", *kids[0].PID))
	if err != nil {
		t.Fatal(err)
	}
	if args := string(cmdline); strings.Contains(args, filepath.Join("orders", "orders")) || !strings.Contains(args, filepath.Join("trades", "trades")) {
		t.Errorf("the seal child runs over %q, want trades' log and not orders'", strings.ReplaceAll(args, "\x00", " "))
	}
	waitFor(t, "trades to go on publishing after the reloads", 10*time.Second, func() bool { return sent.Load() > mark+10 })
	close(stop)
	<-pubDone
}

// TestReloadRefusesAStreamNamedLikeARegisteredOneButForCase: a static
// "Trades" added by a reload beside "trades", which the control API
// registered and serves, would share its directory on a case-insensitive
// file system: it is not added (no directory made), the error and the log
// name both, and the rest of the reload applies.
func TestReloadRefusesAStreamNamedLikeARegisteredOneButForCase(t *testing.T) {
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1] // trades
	logs := &testkit.SyncBuffer{}
	srv := startServer(t, cfg, Options{Logger: log.New(logs)})
	srv.reg.Get("trades").storage = &srv.cfg // as a stream the control API registered

	next := cfg
	upper := config.DefaultStream("Trades")
	upper.Schema = config.RawJSON(config.DemoSchema)
	orders := config.DefaultStream("orders")
	orders.Schema = config.RawJSON(config.DemoSchema)
	next.Streams = []config.Stream{upper, orders}
	err := srv.Reload(next)
	if err == nil || !strings.Contains(err.Error(), `"Trades"`) || !strings.Contains(err.Error(), `"trades"`) || !strings.Contains(err.Error(), "only in case") {
		t.Fatalf("Reload: %v; want a refusal of Trades naming trades", err)
	}
	if srv.reg.Get("Trades") != nil {
		t.Error("Trades serves beside the registered trades")
	}
	if _, err := os.Stat(filepath.Join(cfg.Root, "Trades")); !os.IsNotExist(err) {
		t.Errorf("a directory was made for Trades: %v", err)
	}
	if srv.reg.Get("trades") == nil || srv.reg.Get("orders") == nil {
		t.Errorf("the registered trades and the added orders should serve: %v", srv.reg.Names())
	}
	if out := logs.String(); !strings.Contains(out, "differs only in case") || !strings.Contains(out, "registered=trades") {
		t.Errorf("the log does not name both streams:\n%s", out)
	}
}

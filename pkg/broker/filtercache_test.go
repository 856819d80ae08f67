package broker

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/broker/control"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// tradeIDList is a where= on trade_id listing n distinct ids, salted so
// two salts share none.
func tradeIDList(n, salt int) []byte {
	b := []byte(`{"trade_id":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, int64(salt)*1_000_000+int64(i), 10)
		b = append(b, '"')
	}
	return append(b, "]}"...)
}

// waitFilterBytes waits until the server's filters hold want bytes.
func waitFilterBytes(t *testing.T, srv *Server, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for srv.filters.held.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("filters hold %d bytes, want %d", srv.filters.held.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSubscribersWithTheSameWhereShareOneCompiledFilter: identical filters
// (written differently, too) are compiled once and counted once, and
// their memory is let go when the last of their subscribers leaves.
func TestSubscribersWithTheSameWhereShareOneCompiledFilter(t *testing.T) {
	srv := startServer(t, testConfig(t))
	where := tradeIDList(500, 1)
	spaced := strings.ReplaceAll(string(where), ",", " , ")
	var conns []*websocket.Conn
	for i := 0; i < 20; i++ {
		w := where
		if i%2 == 1 {
			w = []byte(spaced)
		}
		ws, g := mustDial(t, whereURL(srv, w))
		if string(g.Where) != string(where) {
			t.Fatalf("greeting echoes %.60s…, want %.60s…", g.Where, where)
		}
		conns = append(conns, ws)
	}
	srv.filters.mu.Lock()
	entries := len(srv.filters.byF)
	srv.filters.mu.Unlock()
	f, err := srv.reg.Get("trades").sch.CompileFilter(where)
	if err != nil {
		t.Fatal(err)
	}
	if entries != 1 || srv.filters.held.Load() != int64(f.Size()) {
		t.Fatalf("20 subscribers with one filter: %d compiled filters holding %d bytes, want 1 holding %d", entries, srv.filters.held.Load(), f.Size())
	}
	for _, ws := range conns {
		ws.Close()
	}
	waitFilterBytes(t, srv, 0)
}

// TestAWhereOverMaxFilterBytesIsRefusedAsTryAgainLater: a filter that
// would take the filters' memory over limits.max_filter_bytes is refused
// with 1013 (retryable), naming the limit; once others leave it is served.
func TestAWhereOverMaxFilterBytesIsRefusedAsTryAgainLater(t *testing.T) {
	one, err := schema.Any().CompileFilter(tradeIDList(1000, 1))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Limits.MaxFilterBytes = one.Size()*2 + one.Size()/2 // room for two
	srv := startServer(t, cfg)
	a, _ := mustDial(t, whereURL(srv, tradeIDList(1000, 1)))
	mustDial(t, whereURL(srv, tradeIDList(1000, 2)))
	a2, _ := mustDial(t, whereURL(srv, tradeIDList(1000, 1))) // shared: costs nothing
	_, _, err = dial(t, whereURL(srv, tradeIDList(1000, 3)))
	code, reason := closeOf(err)
	if code != 1013 || !strings.Contains(reason, "limits.max_filter_bytes "+strconv.Itoa(cfg.Limits.MaxFilterBytes)) || !strings.Contains(reason, "retry later") {
		t.Fatalf("a third distinct filter over the bound: close %d %q (%v), want 1013 naming limits.max_filter_bytes", code, reason, err)
	}
	if len(reason) > wire.MaxReasonBytes || strings.HasSuffix(wire.ParseReason(reason).String("detail"), "…") {
		t.Fatalf("the reason is cut: %q", reason)
	}
	if !wire.Retryable(wire.ParseClose(code, reason)) {
		t.Fatalf("the Go client does not retry close %d", code)
	}
	if got := srv.filters.refused.Load(); got != 1 {
		t.Fatalf("refusals counted: %d, want 1", got)
	}
	// One of the first filter's two subscribers leaving frees nothing;
	// the second leaving frees its room.
	a.Close()
	a2.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		srv.filters.mu.Lock()
		n := len(srv.filters.byF)
		srv.filters.mu.Unlock()
		if n == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ws, _, err := dial(t, whereURL(srv, tradeIDList(1000, 3))); err == nil {
		ws.Close()
	} else {
		t.Fatalf("refused after the bound had room again: %v", err)
	}
}

// TestFilterMemoryFullReasonFitsACloseFrame: the 1013 reason keeps its
// numbers and the way out at the largest values it can carry.
func TestFilterMemoryFullReasonFitsACloseFrame(t *testing.T) {
	e := &FilterMemoryFull{Size: 1 << 40, Held: 1 << 40, Max: 1 << 40}
	r := e.Reason()
	if len(r) > wire.MaxReasonBytes || !strings.Contains(r, "retry later") || !strings.Contains(r, "limits.max_filter_bytes 1099511627776") {
		t.Fatalf("reason %q (%d bytes)", r, len(r))
	}
	var full *FilterMemoryFull
	if !errors.As(error(e), &full) || !strings.Contains(e.Error(), "raise limits.max_filter_bytes") {
		t.Fatalf("error %q", e.Error())
	}
}

// TestAMigrationRecompilesFiltersWithoutLeakingTheirMemory: a migration
// recompiles the attached subscribers' filters against the stream's new
// schema; the filters' memory is then counted once per distinct filter,
// as before the migration, and is all let go when the subscribers leave.
func TestAMigrationRecompilesFiltersWithoutLeakingTheirMemory(t *testing.T) {
	srv := startServer(t, testConfig(t))
	st := srv.reg.Get("trades")
	st.storage = &srv.cfg // as a registered stream: the control API may migrate it
	sv := control.Serve{Stream: st.cfg, Schema: st.sch, Limits: st.limits, Storage: srv.cfg}
	var conns []*websocket.Conn
	for i := 0; i < 6; i++ {
		ws, _ := mustDial(t, whereURL(srv, tradeIDList(200, i%3)))
		conns = append(conns, ws)
	}
	before := srv.filters.held.Load()
	if _, err := (ctlRuntime{srv}).MigrateStream(context.Background(), sv, func(context.Context, *logstore.Log, []logstore.Option) (*logstore.Log, error) {
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	srv.filters.mu.Lock()
	entries := len(srv.filters.byF)
	srv.filters.mu.Unlock()
	if after := srv.filters.held.Load(); entries != 3 || after != before {
		t.Fatalf("after the migration: %d compiled filters holding %d bytes, want 3 holding %d as before", entries, after, before)
	}
	st.mu.Lock()
	for _, sub := range st.subs {
		if sub.filter == nil || sub.filter != sub.held {
			t.Errorf("a subscriber filters by %p but holds %p", sub.filter, sub.held)
		}
	}
	st.mu.Unlock()
	for _, ws := range conns {
		ws.Close()
	}
	waitFilterBytes(t, srv, 0)
}

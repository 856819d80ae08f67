package broker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/schema"
)

// guardedConfig is testConfig with trades as a protected stream must be
// declared (exactly_once, max_replay null), but no guard yet.
func guardedConfig(t *testing.T) config.Config {
	cfg := testConfig(t)
	cfg.Streams[0].ExactlyOnce = true
	cfg.Streams[0].MaxReplay = nil
	return cfg
}

// history serves cfg once, publishes n trades, and reads them back as a
// consumer does, from offset 1; it returns the greeting's stream_id and
// each row's bytes as its data frame carried them, by offset (rows[0]
// is offset 1).
func history(t *testing.T, cfg config.Config, n int) (string, [][]byte) {
	t.Helper()
	srv := startServer(t, cfg)
	p := dialPublisher(t, srv, "trades")
	for i := range n {
		if r := p.roundTrip(trade(i)); r.Error != "" || len(r.OK) != 1 || r.OK[0] != int64(i+1) {
			t.Fatalf("publish %d: %+v", i, r)
		}
	}
	id := p.g.StreamID
	ws, _ := mustDial(t, wsURL(srv, "/trades?offset=1"))
	rows := make([][]byte, n)
	for i := range n {
		f, err := readFrame(t, ws)
		if err != nil || f.Offset != int64(i+1) {
			t.Fatalf("replay frame %d: %+v, %v", i, f, err)
		}
		rows[i] = f.Row
	}
	ws.Close()
	p.ws.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	return id, rows
}

// guard declares the history_guard of cfg's trades stream.
func guard(cfg *config.Config, id string, offset int64, row []byte) {
	cfg.Streams[0].HistoryGuard = &config.HistoryGuard{StreamID: id, KnownOffset: offset, KnownRow: config.RowText(row)}
}

// wantGuardRefusal runs serve for cfg and checks that it refuses to start,
// failing the named check with a message holding each of want.
func wantGuardRefusal(t *testing.T, cfg config.Config, check string, want ...string) {
	t.Helper()
	err := refusedStart(t, cfg)
	var ge *meta.GuardError
	if !errors.As(err, &ge) {
		t.Fatalf("serve's refusal is %v; want a history_guard refusal of the check %q", err, check)
	}
	if ge.Check != check {
		t.Fatalf("serve refused on the check %q; want %q (%v)", ge.Check, check, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("the refusal does not say %q: %v", w, err)
		}
	}
	t.Logf("refusal: %v", err)
}

// metaStore returns the metadata store of cfg's trades stream.
func metaStore(t *testing.T, cfg config.Config) *meta.Store {
	t.Helper()
	lay, err := meta.NewLayout(cfg.Root, cfg.Published)
	if err != nil {
		t.Fatal(err)
	}
	st, err := meta.NewStore(context.Background(), lay, "trades", cfg.S3)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// commitMeta commits the edit of the trades stream's current metadata.
func commitMeta(t *testing.T, cfg config.Config, edit func(m *meta.Metadata)) {
	t.Helper()
	ctx := context.Background()
	st := metaStore(t, cfg)
	m, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m = m.Clone()
	edit(m)
	if _, err := st.Commit(ctx, m); err != nil {
		t.Fatal(err)
	}
}

// TestHistoryGuardHealthyStreamServes: a protected stream whose history is
// whole passes every check, serves its consumers from offset 1 and takes
// rows.
func TestHistoryGuardHealthyStreamServes(t *testing.T) {
	cfg := guardedConfig(t)
	id, rows := history(t, cfg, 5)
	guard(&cfg, id, 3, rows[2])
	srv := startServer(t, cfg)
	ws, g := mustDial(t, wsURL(srv, "/trades?offset=1"))
	if g.StreamID != id {
		t.Fatalf("greeting stream_id %s, want %s", g.StreamID, id)
	}
	for i := range rows {
		f, err := readFrame(t, ws)
		if err != nil || string(f.Row) != string(rows[i]) {
			t.Fatalf("replay of offset %d: %s, %v; want %s", i+1, f.Row, err, rows[i])
		}
	}
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(trade(99)); r.Error != "" || len(r.OK) != 1 || r.OK[0] != 6 {
		t.Fatalf("publish to the protected stream: %+v", r)
	}
	// The guard also holds across the history's growth: the known row is
	// an old one, and the tail moved on.
}

// TestHistoryGuardRefusesAnotherIdentity: the same name, another
// stream_id (a root swapped for another stream's) fails "identity".
func TestHistoryGuardRefusesAnotherIdentity(t *testing.T) {
	cfg := guardedConfig(t)
	id, rows := history(t, cfg, 3)
	other, err := meta.NewStreamID()
	if err != nil {
		t.Fatal(err)
	}
	guard(&cfg, other, 1, rows[0])
	wantGuardRefusal(t, cfg, meta.CheckIdentity, id, other)
}

// TestHistoryGuardRefusesToStartAfresh: nothing of a protected stream
// anywhere (a wiped root with the default published prefix under it)
// fails "identity", and nothing is created.
func TestHistoryGuardRefusesToStartAfresh(t *testing.T) {
	cfg := guardedConfig(t)
	id, rows := history(t, cfg, 3)
	if err := os.RemoveAll(cfg.Root); err != nil {
		t.Fatal(err)
	}
	guard(&cfg, id, 1, rows[0])
	wantGuardRefusal(t, cfg, meta.CheckIdentity, id, "afresh")
	if _, err := os.Stat(filepath.Join(cfg.Root, "trades")); !os.IsNotExist(err) {
		t.Fatalf("the refused start created the stream's home: %v", err)
	}
}

// TestHistoryGuardRefusesAMigratedStream: a second log (a migrate) fails
// "no migration", naming the seam.
func TestHistoryGuardRefusesAMigratedStream(t *testing.T) {
	cfg := guardedConfig(t)
	id, rows := history(t, cfg, 3)
	ctx := context.Background()
	lay, err := meta.NewLayout(cfg.Root, cfg.Published)
	if err != nil {
		t.Fatal(err)
	}
	// What migrate leaves: the first log fenced at its end, the next one
	// starting there, both named by the metadata.
	old, err := logstore.Open(lay.LogDir("trades", "trades"), logstore.Writer)
	if err != nil {
		t.Fatal(err)
	}
	end, err := old.Fence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sch := old.Schema()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	name := meta.LogName("trades", 2)
	lc, err := cfg.LogSettings(cfg.Streams[0], name)
	if err != nil {
		t.Fatal(err)
	}
	lc.Start = end
	next, err := logstore.Create(lay.LogDir("trades", name), sch, lc)
	if err != nil {
		t.Fatal(err)
	}
	d, err := meta.DescribeLog(next, end)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Close(); err != nil {
		t.Fatal(err)
	}
	commitMeta(t, cfg, func(m *meta.Metadata) {
		m.Logs[0].EndOffset = &end
		m.Logs[0].State = meta.Sealed
		if err := m.AddLog(d, sch); err != nil {
			t.Fatal(err)
		}
	})
	guard(&cfg, id, 1, rows[0])
	wantGuardRefusal(t, cfg, meta.CheckNoMigration, "2 logs", name, fmt.Sprintf("offset %d", end))
}

// TestHistoryGuardRefusesRetention: a retention window in the metadata
// fails "no retention".
func TestHistoryGuardRefusesRetention(t *testing.T) {
	cfg := guardedConfig(t)
	id, rows := history(t, cfg, 3)
	commitMeta(t, cfg, func(m *meta.Metadata) {
		d := "30d"
		m.Retention.MaxAge = &d
	})
	guard(&cfg, id, 1, rows[0])
	wantGuardRefusal(t, cfg, meta.CheckNoRetention, "max_age 30d")
}

// TestHistoryGuardRefusesALogNotStartingAtOne: a log created at offset 5
// (recorded by an upgrade, so its identity is known) fails "starts at
// offset 1".
func TestHistoryGuardRefusesALogNotStartingAtOne(t *testing.T) {
	cfg := guardedConfig(t)
	lay, err := meta.NewLayout(cfg.Root, cfg.Published)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := cfg.LogSettings(cfg.Streams[0], "trades")
	if err != nil {
		t.Fatal(err)
	}
	lc.Start = 5
	sch, err := schema.Compile([]byte(config.DemoSchema))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(lay.StreamDir("trades"), 0o755); err != nil {
		t.Fatal(err)
	}
	lg, err := logstore.Create(lay.LogDir("trades", "trades"), sch, lc)
	if err != nil {
		t.Fatal(err)
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, cfg) // records the log under a new stream_id
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(trade(1)); r.Error != "" || len(r.OK) != 1 || r.OK[0] != 5 {
		t.Fatalf("publish: %+v", r)
	}
	id := p.g.StreamID
	p.ws.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	row, err := sch.AppendCanonical(nil, []byte(trade(1)))
	if err != nil {
		t.Fatal(err)
	}
	guard(&cfg, id, 5, row)
	wantGuardRefusal(t, cfg, meta.CheckStart, "starts at offset 5")
}

// TestHistoryGuardRefusesAHistoryWithAGap: rows below a floor set on the
// log (offsets 1 and 2 no longer served) fail "dense history".
func TestHistoryGuardRefusesAHistoryWithAGap(t *testing.T) {
	cfg := guardedConfig(t)
	id, rows := history(t, cfg, 4)
	lay, err := meta.NewLayout(cfg.Root, cfg.Published)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := logstore.Open(lay.LogDir("trades", "trades"), logstore.Writer)
	if err != nil {
		t.Fatal(err)
	}
	if err := lg.SetFloor(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	guard(&cfg, id, 4, rows[3])
	wantGuardRefusal(t, cfg, meta.CheckDense, "earliest offset is 3")
}

// TestHistoryGuardRefusesAHistoryWithAHole: offsets recorded as skipped
// (the holes a restore past a fence leaves) inside [1, end), while offset
// 1 is still held, fail "dense history" by the count of rows held.
func TestHistoryGuardRefusesAHistoryWithAHole(t *testing.T) {
	cfg := guardedConfig(t)
	id, rows := history(t, cfg, 4)
	lay, err := meta.NewLayout(cfg.Root, cfg.Published)
	if err != nil {
		t.Fatal(err)
	}
	// The log is closed; buffer.db is edited as a restore would leave it.
	db, err := sql.Open("sqlite", filepath.Join(lay.LogDir("trades", "trades"), logstore.BufferFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO holes(start_offset, end_offset) VALUES (2, 3)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	guard(&cfg, id, 1, rows[0])
	wantGuardRefusal(t, cfg, meta.CheckDense, "holds 3 rows in offsets [1, 5), not 4")
}

// TestHistoryGuardRefusesAnotherKnownRow: the row at known_offset differs
// (one byte) or known_offset is past the tail: "known row".
func TestHistoryGuardRefusesAnotherKnownRow(t *testing.T) {
	cfg := guardedConfig(t)
	id, rows := history(t, cfg, 3)
	t.Run("other bytes", func(t *testing.T) {
		guard(&cfg, id, 2, rows[0]) // offset 1's row, offset 2 named
		wantGuardRefusal(t, cfg, meta.CheckKnownRow, "offset 2 holds "+string(rows[1]))
	})
	t.Run("past the tail", func(t *testing.T) {
		guard(&cfg, id, 4, rows[0])
		wantGuardRefusal(t, cfg, meta.CheckKnownRow, "known_offset is 4", "ends at offset 3")
	})
}

// TestHistoryGuardRefusesAStreamAddedByReload: a protected stream added
// to a running server is checked the same way; it is not added, and the
// other streams keep serving.
func TestHistoryGuardRefusesAStreamAddedByReload(t *testing.T) {
	cfg := guardedConfig(t)
	_, rows := history(t, cfg, 2)
	base := cfg
	base.Streams = cfg.Streams[1:] // serve without trades
	srv := startServer(t, base)
	other, err := meta.NewStreamID()
	if err != nil {
		t.Fatal(err)
	}
	next := cfg
	next.Streams = append([]config.Stream(nil), cfg.Streams...)
	guard(&next, other, 1, rows[0])
	err = srv.Reload(next)
	var ge *meta.GuardError
	if !errors.As(err, &ge) || ge.Check != meta.CheckIdentity {
		t.Fatalf("reload adding a protected stream with another identity: %v; want the %q check to fail", err, meta.CheckIdentity)
	}
	if _, _, err := dial(t, wsURL(srv, "/trades")); closeCode(err) != 4404 {
		code := closeCode(err)
		t.Fatalf("the refused stream answers with close %d; want 4404", code)
	}
	mustDial(t, wsURL(srv, "/live"))
}

// closeCode returns the close code of err, or 0.
func closeCode(err error) int {
	code, _ := closeOf(err)
	return code
}

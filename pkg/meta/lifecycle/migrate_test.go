//go:build linux

package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
	"github.com/streamcast/streamcast/pkg/wire"
)

// checkMigrated checks a stream of 23 rows migrated once to schemaV2: the
// old log sealed, fenced and published whole, exactly [1,24) in its
// Parquet files and its published table; the new log trades-v2 empty from
// the seam 24 with publisher p's mark; the metadata naming both, the
// published copy first.
func checkMigrated(t *testing.T, f *fixture) {
	t.Helper()
	const seam = 24
	old := f.open(t, stream)
	st, err := old.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Fenced || st.End != seam || st.PublishedThrough != seam-1 {
		t.Errorf("the old log: fenced %v, end %d, published through %d; want fenced at %d, published through %d", st.Fenced, st.End, st.PublishedThrough, seam, seam-1)
	}
	dense(t, "the old log's Parquet files", parquetOffsets(t, old.Dir()), 1, seam)
	dense(t, "the old log's published table", f.publishedOffsets(t, stream), 1, seam)

	next := f.open(t, "trades-v2")
	if earliest, end, err := next.Extent(context.Background()); err != nil || earliest != seam || end != seam || next.Config().Start != seam {
		t.Errorf("the new log: extent [%d,%d) start %d (%v); want empty from %d", earliest, end, next.Config().Start, err, seam)
	}
	marks, err := next.Marks(context.Background())
	if err != nil || !slices.Equal(marks, []logstore.Mark{{Publisher: "p", LastSeq: 23, LastOffset: 23}}) {
		t.Errorf("the new log's marks: %+v (%v); want p at seq 23, offset 23", marks, err)
	}
	if string(next.Schema().JSON()) != string(mustSchema(t, schemaV2).JSON()) {
		t.Errorf("the new log's schema is %s", next.Schema().JSON())
	}

	md := f.load(t)
	pub := f.loadPublished(t)
	if pub.Version != md.Version {
		t.Errorf("the published copy is version %d, the home's %d", pub.Version, md.Version)
	}
	if md.Intent != nil || len(md.Logs) != 2 {
		t.Fatalf("metadata version %d: intent %+v, %d logs; want no intent, 2 logs", md.Version, md.Intent, len(md.Logs))
	}
	a, b := md.Logs[0], md.Logs[1]
	if a.Name != stream || a.State != meta.Sealed || a.EndOffset == nil || *a.EndOffset != seam {
		t.Errorf("the old log's entry: %s", jsonOf(t, a))
	}
	// The sealed log's statistics are rolled up as it is sealed: its
	// stamps span its rows, and every column it has bounds.
	if a.FirstTS == nil || a.LastTS == nil || *a.FirstTS > *a.LastTS || len(a.Stats) == 0 {
		t.Errorf("the old log's entry lacks its statistics: %s", jsonOf(t, a))
	}
	// Its columns are required: sealed files count zero nulls, known.
	for _, col := range []string{"id", "sym"} {
		if c := a.Stats[col]; c.NullCount == nil || *c.NullCount != 0 {
			t.Errorf("the old log's column %s: %s; want a null count of 0", col, jsonOf(t, c))
		}
	}
	if b.Name != "trades-v2" || b.State != meta.Live || b.StartOffset != seam || b.EndOffset != nil || b.LogID != next.ID() {
		t.Errorf("the new log's entry: %s (log id %s)", jsonOf(t, b), next.ID())
	}
	if md.Columns["note"] != "utf8" || md.Columns["sym"] != "utf8" || md.Columns["id"] != "int64" {
		t.Errorf("the metadata's columns: %v", md.Columns)
	}
	if _, err := os.Stat(f.lay.LogDir(stream, "trades-v3")); !os.IsNotExist(err) {
		t.Errorf("a third log exists: %v", err)
	}
}

// TestMigrateSeamIsExact migrates a stream of 23 rows and reads the seam
// from every side: the old log's Parquet files and published table end at
// 23, the new log starts at 24, serve refuses a subscriber below the seam
// with 4416 evicted (earliest 24) and serves one at it, and the
// exactly-once publisher resumes across the seam with no duplicate.
func TestMigrateSeamIsExact(t *testing.T) {
	for _, kind := range []string{"default", "s3"} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind, 23)
			m, err := f.migrate(t, schemaV2)
			if err != nil {
				t.Fatal(err)
			}
			if m.From != stream || m.To != "trades-v2" || m.Seam != 24 || m.Marks != 1 || m.Unchanged || m.Resumed || m.Version != 3 {
				t.Errorf("Migrate = %+v; want trades → trades-v2 at 24, one mark, version 3", m)
			}
			checkMigrated(t, f)

			base := brokertest.Start(t, f.serveConfig(schemaV2))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err = wire.Subscribe(ctx, base+"/"+stream, wire.SubscribeOptions{Offset: wire.At(1)})
			var nr *wire.NotReplayable
			if !errors.As(err, &nr) || nr.Why != wire.WhyEvicted || nr.Earliest != 24 || nr.Offset != 1 {
				t.Fatalf("subscribe at 1, below the seam: %v; want 4416 evicted with earliest 24", err)
			}

			// The last batch before the seam, sent again over a raw socket: a
			// duplicate, answered with the old offsets.
			ws, _, err := websocket.DefaultDialer.DialContext(ctx, base+"/"+stream+"?publish&publisher=p", nil)
			if err != nil {
				t.Fatal(err)
			}
			var g wire.Greeting
			if err := ws.ReadJSON(&g); err != nil {
				t.Fatal(err)
			}
			if mk := g.Publisher; mk == nil || mk.LastSeq != 23 || mk.LastOffset != 23 {
				t.Fatalf("the publisher's mark after the migration: %+v; want seq 23 at offset 23", mk)
			}
			if err := ws.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `[21,[%s,%s,%s]]`, row(20, true), row(21, true), row(22, true))); err != nil {
				t.Fatal(err)
			}
			var reply struct {
				OK        []*int64 `json:"ok"`
				Duplicate bool     `json:"duplicate"`
			}
			if err := ws.ReadJSON(&reply); err != nil || !reply.Duplicate {
				t.Fatalf("seqs 21-23 resent across the seam: %+v, %v; want a duplicate", reply, err)
			}
			_ = ws.Close()

			p, err := wire.Publish(ctx, base+"/"+stream, wire.PublishOptions{Publisher: "p"})
			if err != nil {
				t.Fatal(err)
			}
			offs, err := p.SendBatch(ctx, [][]byte{row(23, true), row(24, true)})
			if err != nil || !slices.Equal(offs, []int64{24, 25}) {
				t.Fatalf("the next batch: %v, %v; want offsets 24 and 25", offs, err)
			}
			_ = p.Close()

			s, err := wire.Subscribe(ctx, base+"/"+stream, wire.SubscribeOptions{FromEarliest: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if r := s.Greeting().Replay; r == nil || r.Start != 24 || r.End != 26 {
				t.Fatalf("subscribe from the earliest: replay %+v; want [24,26)", r)
			}
			for i, want := range []int64{24, 25} {
				msg, err := s.Recv(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if msg.Offset != want || string(msg.Row) != string(row(23+i, true)) {
					t.Fatalf("replayed %d %s; want %d %s", msg.Offset, msg.Row, want, row(23+i, true))
				}
			}
		})
	}
}

// TestMigrateUnchangedIsANoOp: the declaration the current log has
// changes nothing and says so.
func TestMigrateUnchangedIsANoOp(t *testing.T) {
	f := newFixture(t, "default", 7)
	m, err := f.migrate(t, schemaV1)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Unchanged || m.From != stream || m.To != stream || m.Seam != 1 || m.Version != 1 {
		t.Errorf("Migrate to the same schema = %+v; want unchanged", m)
	}
	if md := f.load(t); md.Version != 1 || md.Intent != nil {
		t.Errorf("the metadata moved to version %d (intent %+v)", md.Version, md.Intent)
	}
	if st, _ := f.open(t, stream).Status(context.Background()); st.Fenced {
		t.Error("an unchanged migration fenced the log")
	}
	if _, err := os.Stat(f.lay.LogDir(stream, "trades-v2")); !os.IsNotExist(err) {
		t.Errorf("an unchanged migration made trades-v2: %v", err)
	}
}

// TestMigrateKeepsEveryColumnsType: a column's type never changes, not
// after it was removed and added back, not int32 to int64; nullability
// may. A refusal names the column and both types and changes nothing.
func TestMigrateKeepsEveryColumnsType(t *testing.T) {
	const (
		idOnly      = `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`
		symInt      = `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":"integer"}},"required":["id","sym"]}`
		symNullable = `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":["string","null"]}},"required":["id","sym"]}`
		n32         = `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":["string","null"]},"n":{"type":["integer","null"],"format":"int32"}},"required":["id","sym","n"]}`
		n64         = `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":["string","null"]},"n":{"type":["integer","null"]}},"required":["id","sym","n"]}`
	)
	f := newFixture(t, "default", 3)
	steps := []struct {
		schema string
		refuse []string // what the refusal names; nil: accepted
		to     string
	}{
		{schema: symInt, refuse: []string{`column "sym"`, "utf8", "int64"}},
		{schema: idOnly, to: "trades-v2"},                                   // sym removed
		{schema: symInt, refuse: []string{`column "sym"`, "utf8", "int64"}}, // and re-added as another type
		{schema: symNullable, to: "trades-v3"},                              // re-added as its type, now nullable
		{schema: n32, to: "trades-v4"},
		{schema: n64, refuse: []string{`column "n"`, "int32", "int64"}},
	}
	for i, st := range steps {
		before := f.load(t)
		m, err := f.migrate(t, st.schema)
		if st.refuse == nil {
			if err != nil || m.To != st.to {
				t.Fatalf("step %d: Migrate = %+v, %v; want to %s", i, m, err, st.to)
			}
			continue
		}
		if err == nil {
			t.Fatalf("step %d: Migrate to %s was accepted (%+v); want a refusal", i, st.schema, m)
		}
		for _, want := range st.refuse {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("step %d: the refusal lacks %q: %v", i, want, err)
			}
		}
		if after := f.load(t); after.Version != before.Version || after.Intent != nil {
			t.Errorf("step %d: a refused migration moved the metadata from version %d to %d (intent %+v)", i, before.Version, after.Version, after.Intent)
		}
		if st, _ := f.open(t, before.Current().Name).Status(context.Background()); st.Fenced {
			t.Errorf("step %d: a refused migration fenced %s", i, before.Current().Name)
		}
	}
}

// TestMigrateRefusesWhileServeHoldsTheLog: migrate is offline; the
// writer lock serve holds refuses it, naming serve's pid, before anything
// is recorded.
func TestMigrateRefusesWhileServeHoldsTheLog(t *testing.T) {
	f := newFixture(t, "default", 3)
	brokertest.Start(t, f.serveConfig(schemaV1))
	_, err := f.migrate(t, schemaV2)
	if err == nil {
		t.Fatal("migrate ran beside serve")
	}
	for _, want := range []string{fmt.Sprintf("pid %d", os.Getpid()), "stop `streamcast serve`"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q: %v", want, err)
		}
	}
	if md := f.load(t); md.Version != 1 || md.Intent != nil {
		t.Errorf("the refused migrate moved the metadata to version %d (intent %+v)", md.Version, md.Intent)
	}
}

// TestKilledMigrateFinishesOnRerun kills a real migrate process (SIGKILL)
// right after each of its steps; the next run finishes it, and the stream
// ends up exactly as after an uninterrupted migration.
func TestKilledMigrateFinishesOnRerun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	for _, step := range []string{lifecycle.StepIntent, lifecycle.StepSealed, lifecycle.StepPublished, lifecycle.StepFenced,
		lifecycle.StepCreated, lifecycle.StepMarks, lifecycle.StepCommitted} {
		t.Run(step, func(t *testing.T) {
			f := newFixture(t, "default", 23)
			killedAt(t, f, "migrate", step, schemaV2)
			m, err := f.migrate(t, schemaV2)
			if err != nil {
				t.Fatalf("the rerun after a kill at %s: %v", step, err)
			}
			if step == lifecycle.StepCommitted {
				if !m.Unchanged || m.To != "trades-v2" || m.Seam != 24 {
					t.Errorf("the rerun after the last step: %+v; want unchanged on trades-v2 from 24", m)
				}
			} else if !m.Resumed || m.To != "trades-v2" || m.Seam != 24 || m.Marks != 1 {
				t.Errorf("the rerun: %+v; want a resumed migration to trades-v2 at 24", m)
			}
			checkMigrated(t, f)
		})
	}
}

// TestResumedMigrationKeepsItsRecordedSchema: a rerun finishes the
// migration its intent recorded, whatever the config declares meanwhile,
// and says when the config now differs.
func TestResumedMigrationKeepsItsRecordedSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	f := newFixture(t, "default", 23)
	killedAt(t, f, "migrate", lifecycle.StepFenced, schemaV2)
	m, err := f.migrate(t, schemaV1)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Resumed || !m.Differs || m.To != "trades-v2" || m.Seam != 24 {
		t.Errorf("the rerun with another declaration: %+v; want the recorded migration finished, and told that the config differs", m)
	}
	checkMigrated(t, f)
}

// TestMigrateWorksThroughTheLentWriter is the online migration's way in:
// serve holds the current log open as the Writer and lends it
// (Options.Current). Migrate works through that handle, neither closing
// it nor opening the log again (which the held lock would refuse), and
// the stream ends up exactly as after an offline migration; a handle of
// another log is not taken for the current one.
func TestMigrateWorksThroughTheLentWriter(t *testing.T) {
	f := newFixture(t, "default", 23)
	ctx := context.Background()
	other, err := logstore.Create(t.TempDir()+"/other", mustSchema(t, schemaV1), f.logConfig("other", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lg, err := logstore.Open(f.lay.LogDir(stream, stream), logstore.Writer)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	d := lifecycle.Declaration{Schema: mustSchema(t, schemaV2), Log: f.logConfig("", nil)}
	_, err = lifecycle.Migrate(ctx, f.stream(), d, lifecycle.Options{Current: other})
	if err == nil || !strings.Contains(err.Error(), "is open for writing by") {
		t.Fatalf("Migrate lent another log's handle: %v; want the current log's lock to refuse it", err)
	}
	if md := f.load(t); md.Version != 1 || md.Intent != nil {
		t.Fatalf("the refused migration moved the metadata to version %d (intent %+v)", md.Version, md.Intent)
	}
	m, err := lifecycle.Migrate(ctx, f.stream(), d, lifecycle.Options{Current: lg})
	if err != nil {
		t.Fatal(err)
	}
	if m.From != stream || m.To != "trades-v2" || m.Seam != 24 || m.Marks != 1 || m.Version != 3 {
		t.Errorf("Migrate = %+v; want trades → trades-v2 at 24, one mark, version 3", m)
	}
	// Still open: the owner closes it.
	st, err := lg.Status(ctx)
	if err != nil || !st.Fenced || st.End != 24 {
		t.Fatalf("the lent handle after the migration: %+v, %v; want it open, fenced at 24", st, err)
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	checkMigrated(t, f)
}

// TestMigrateKilledInCreateFinishesOnRerun: a migration killed while
// logstore.Create built the next log's buffer.db (as buffer.db.new, torn)
// left no buffer.db; the rerun removes what it left and finishes.
func TestMigrateKilledInCreateFinishesOnRerun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	f := newFixture(t, "default", 23)
	killedAt(t, f, "migrate", lifecycle.StepFenced, schemaV2)
	dir := f.lay.LogDir(stream, "trades-v2")
	if err := os.MkdirAll(dir+"/files", 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"lock": "", "buffer.db.new": "SQLite format 3\x00 torn"} {
		if err := os.WriteFile(dir+"/"+name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := f.migrate(t, schemaV2)
	if err != nil {
		t.Fatalf("the rerun after a kill in Create: %v", err)
	}
	if !m.Resumed || m.To != "trades-v2" || m.Seam != 24 {
		t.Errorf("the rerun: %+v; want a resumed migration to trades-v2 at 24", m)
	}
	checkMigrated(t, f)
}

// TestMigrateHandsTheNextLogOverOpen: with KeepNext, Migrate returns the
// log it moved the stream to still open as the Writer (serve takes it
// over rather than closing and reopening it), made with NextOptions; the
// caller owns it. An unchanged declaration hands nothing.
func TestMigrateHandsTheNextLogOverOpen(t *testing.T) {
	f := newFixture(t, "default", 23)
	ctx := context.Background()
	d := lifecycle.Declaration{Schema: mustSchema(t, schemaV2), Log: f.logConfig("", nil)}
	m, err := lifecycle.Migrate(ctx, f.stream(), d, lifecycle.Options{KeepNext: true, NextOptions: []logstore.Option{logstore.WithIdleClose(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Log == nil || m.Log.Dir() != f.lay.LogDir(stream, "trades-v2") {
		t.Fatalf("Migrate handed over %v; want trades-v2 open", m.Log)
	}
	if st, err := m.Log.Status(ctx); err != nil || st.End != 24 || st.Fenced {
		t.Errorf("the handed-over log: %+v, %v; want open, empty from 24", st, err)
	}
	var locked *logstore.LockedError
	if lg, err := logstore.Open(m.Log.Dir(), logstore.Writer); !errors.As(err, &locked) {
		if err == nil {
			lg.Close()
		}
		t.Errorf("opening the handed-over log as another Writer: %v; want it locked by the handle", err)
	}
	if err := m.Log.Close(); err != nil {
		t.Fatal(err)
	}
	checkMigrated(t, f)
	again, err := lifecycle.Migrate(ctx, f.stream(), d, lifecycle.Options{KeepNext: true})
	if err != nil || !again.Unchanged || again.Log != nil {
		t.Errorf("an unchanged migration with KeepNext: %+v, %v; want unchanged, no log handed over", again, err)
	}
}

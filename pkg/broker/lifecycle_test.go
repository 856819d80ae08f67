package broker

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
	"github.com/streamcast/streamcast/pkg/wire"
)

// TestRetiredStreamGetsOnlyTheRetainChild: serve runs its maintenance
// children over the logs that take rows; a retired stream's log (fenced
// and published whole by retire) is not among them, the other streams'
// logs are, and only the retain child runs over it, since its retention
// window still applies.
func TestRetiredStreamGetsOnlyTheRetainChild(t *testing.T) {
	cfg := testConfig(t)
	other := config.DefaultStream("other")
	cfg.Streams = []config.Stream{cfg.Streams[0], other}
	srv := startServer(t, cfg)
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(batch(0, 3)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	lay, err := meta.NewLayout(cfg.Root, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lifecycle.Retire(context.Background(), lifecycle.Stream{Layout: lay, Name: "trades"}, lifecycle.Options{}); err != nil {
		t.Fatal(err)
	}

	srv = startServer(t, cfg)
	logs, err := srv.maintainedLogs()
	dirs, retired := logs.Live, logs.Retired
	if err != nil {
		t.Fatal(err)
	}
	otherDir, _ := filepath.Abs(lay.LogDir("other", "other"))
	tradesDir, _ := filepath.Abs(lay.LogDir("trades", "trades"))
	if !slices.Equal(dirs, []string{otherDir}) {
		t.Errorf("the maintenance children's logs: %q; want only %s, not the retired stream's", dirs, otherDir)
	}
	if !slices.Equal(retired, []string{tradesDir}) {
		t.Errorf("the retain child's extra logs: %q; want the retired stream's, %s", retired, tradesDir)
	}
}

// TestServeRefusesAnInterruptedMigration: a migrate intent in the
// metadata means the current log may be fenced and its successor half
// made; serve refuses the stream and names the command that finishes it.
func TestServeRefusesAnInterruptedMigration(t *testing.T) {
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1]
	srv := startServer(t, cfg)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	lay, err := meta.NewLayout(cfg.Root, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := meta.NewStore(ctx, lay, "trades", warehouse.S3{})
	if err != nil {
		t.Fatal(err)
	}
	md, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := md.Clone()
	if next.Intent, err = meta.NewIntent(lifecycle.KindMigrate, map[string]string{"from": "trades", "to": "trades-v2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctx, next); err != nil {
		t.Fatal(err)
	}
	srv, err = New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, 10*time.Second) // a serve that started anyway stops
	defer cancel()
	err = srv.Run(runCtx)
	if err == nil || !strings.Contains(err.Error(), "a migrate of it was interrupted (its intent is recorded in metadata version 2); run `streamcast migrate trades` to finish it") {
		t.Fatalf("serve over an interrupted migration: %v", err)
	}
}

// TestServeServesTheMigratedLog: after a migration serve opens the new
// log, and its maintenance children get that log's directory.
func TestServeServesTheMigratedLog(t *testing.T) {
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1]
	srv := startServer(t, cfg)
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(batch(0, 3)); r.Error != "" {
		t.Fatalf("publish: %+v", r)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	lay, err := meta.NewLayout(cfg.Root, "")
	if err != nil {
		t.Fatal(err)
	}
	v2 := strings.Replace(config.DemoSchema, `"trade_id": {"type": ["string", "null"]}`, `"trade_id": {"type": ["string", "null"]}, "venue": {"type": ["string", "null"]}`, 1)
	cfg.Streams[0].Schema = config.RawJSON(v2)
	schemas, err := cfg.Compile()
	if err != nil {
		t.Fatal(err)
	}
	m, err := lifecycle.Migrate(context.Background(), lifecycle.Stream{Layout: lay, Name: "trades"}, lifecycle.Declaration{Schema: schemas[0]}, lifecycle.Options{})
	if err != nil || m.To != "trades-v2" || m.Seam != 4 {
		t.Fatalf("Migrate = %+v, %v", m, err)
	}
	one := int64(1) // the distance to the seam is past max_replay: the count of held rows decides
	cfg.Streams[0].MaxReplay = &one
	srv = startServer(t, cfg)
	logs, err := srv.maintainedLogs()
	dirs := logs.Live
	if err != nil {
		t.Fatal(err)
	}
	_, err = wire.Subscribe(t.Context(), wsURL(srv, "/trades"), wire.SubscribeOptions{Offset: wire.At(1)})
	var nr *wire.NotReplayable
	if !errors.As(err, &nr) || nr.Why != wire.WhyEvicted || nr.Earliest != 4 {
		t.Errorf("subscribe at 1, below the seam 4: %v; want 4416 evicted with earliest 4", err)
	}
	want, _ := filepath.Abs(lay.LogDir("trades", "trades-v2"))
	if !slices.Equal(dirs, []string{want}) {
		t.Errorf("the maintenance children's logs: %q; want %s", dirs, want)
	}
	p = dialPublisher(t, srv, "trades")
	if p.g.EndOffset != 4 {
		t.Errorf("the greeting's end_offset is %d, want the seam 4", p.g.EndOffset)
	}
}

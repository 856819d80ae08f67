//go:build linux

package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/hadoop"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// readPublished reads the stream's table (namespace and table both
// stream) under warehouse with iceberg-go's own hadoop catalog, as any
// reader would, and returns each row's event_ts by offset, failing on a
// duplicate offset.
func readPublished(t *testing.T, warehouse string, props iceberg.Properties, stream string) map[int64]int64 {
	t.Helper()
	ctx := context.Background()
	cat, err := hadoop.NewCatalog("test", warehouse, props)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(ctx, table.Identifier{stream, stream})
	if err != nil {
		t.Fatalf("load the table %s.%s under %s: %v", stream, stream, warehouse, err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]int64{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		offs := rec.Column(rec.Schema().FieldIndices(logstore.OffsetColumn)[0]).(*array.Int64)
		evs := rec.Column(rec.Schema().FieldIndices("event_ts")[0]).(*array.Int64)
		for i := range offs.Len() {
			if _, dup := got[offs.Value(i)]; dup {
				t.Fatalf("the table holds offset %d twice", offs.Value(i))
			}
			got[offs.Value(i)] = evs.Value(i)
		}
		rec.Release()
	}
	return got
}

// checkEveryAckedRow fails unless got holds exactly offsets 1..acked, each
// with the trade it was acknowledged for (trade(i) went to offset i+1).
func checkEveryAckedRow(t *testing.T, got map[int64]int64, acked int) {
	t.Helper()
	if len(got) != acked {
		t.Errorf("the table holds %d rows, want every one of the %d acknowledged", len(got), acked)
	}
	for off := int64(1); off <= int64(acked); off++ {
		ev, ok := got[off]
		if !ok {
			t.Fatalf("the table lacks offset %d", off)
		}
		if want := int64(1700000000000000 + off - 1); ev != want {
			t.Fatalf("offset %d holds event_ts %d, acknowledged %d", off, ev, want)
		}
	}
}

// TestServePublishesUnderTheConfiguredPrefix runs `streamcast serve` as a
// process with published: file:///…: its maintenance children publish
// there while it runs, and after SIGTERM the table there holds every
// acknowledged row; nothing goes to the default <root>/published.
func TestServePublishesUnderTheConfiguredPrefix(t *testing.T) {
	exe := streamcastExe(t)
	dir := t.TempDir()
	pub, root := filepath.Join(dir, "pub"), filepath.Join(dir, "data")
	if err := os.WriteFile(filepath.Join(dir, "trades.json"), []byte(config.DemoSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	configFile := filepath.Join(dir, "streamcast.yaml")
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
root: %s
published: file://%s
tiers: {staging_retention: 10m}
streams:
  - name: trades
    schema_file: trades.json
maintain: {seal_every: 100ms, compact_every: 1h, publish_every: 200ms, clean_every: 1h, clean_published_every: 1h, flush_every: 1s}
`, root, pub)
	if err := os.WriteFile(configFile, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	serve, done, stderr, addr := startServeProcess(t, exe, configFile, filepath.Join(dir, "addr"))

	ws, g := mustDial(t, "ws://"+addr+"/trades?publish")
	p := &pubConn{t: t, ws: ws, g: g}
	const per = 10
	acked := 0
	send := func(frames int) {
		for range frames {
			if r := p.roundTrip(batch(acked, per)); r.Error != "" || len(r.OK) != per || r.OK[0] != int64(acked+1) {
				t.Fatalf("publish: %+v", r)
			}
			acked += per
		}
	}
	send(5)
	// The children publish there while serve runs (a flush each second).
	hint := filepath.Join(pub, "trades", "trades", "metadata", "version-hint.text")
	waitFor(t, "the publish child to commit under "+pub, 30*time.Second, func() bool {
		_, err := os.Stat(hint)
		return err == nil
	})
	send(7) // and these only through the stop's flush, or the next one

	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not stop within 60s of SIGTERM:\n%s", stderr)
	}
	if code := serve.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM:\n%s", code, stderr)
	}
	checkEveryAckedRow(t, readPublished(t, "file://"+pub, nil, "trades"), acked)
	if _, err := os.Stat(filepath.Join(root, meta.PublishedDir)); !os.IsNotExist(err) {
		t.Errorf("something was published under the default <root>/published (%v)", err)
	}
	// The log stored the configured prefix and tiers for every process
	// that maintains it.
	l, err := logstore.Open(logDirOf(t, config.Config{Root: root}, "trades"), logstore.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if c := l.Config(); c.Published != pub || c.StagingRetention != 10*time.Minute {
		t.Errorf("the log stores published %q, staging_retention %s; want %s and 10m", c.Published, c.StagingRetention, pub)
	}
}

// TestServePublishesToS3 runs serve, with real maintenance children, over
// a real S3 server (versitygw): the configured prefix and s3: settings
// reach every child through the log, the credentials only through the
// environment, and after a graceful stop the table on S3 holds every
// acknowledged row.
func TestServePublishesToS3(t *testing.T) {
	exe := streamcastExe(t)
	s3 := startS3(t)
	s3.UseCredentials(t) // serve's environment, which its children inherit
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1]
	cfg.Published = "s3://" + testBucket + "/tables"
	cfg.S3 = warehouse.S3{Endpoint: s3.Endpoint(), Region: testRegion, PathStyle: true}
	cfg.Maintain = maintainOf(map[logstore.Role]time.Duration{logstore.RoleSeal: 100 * time.Millisecond, logstore.RolePublish: 200 * time.Millisecond}, time.Second)
	logs := &testkit.SyncBuffer{}
	srv := startServer(t, cfg, Options{Executable: exe, Logger: log.New(logs)})

	p := dialPublisher(t, srv, "trades")
	const frames, per = 12, 10
	for i := range frames {
		if r := p.roundTrip(batch(i*per, per)); r.Error != "" {
			t.Fatalf("publish: %+v", r)
		}
	}
	hint := "tables/trades/trades/metadata/version-hint.text"
	waitFor(t, "the publish child to commit to S3", 30*time.Second, func() bool {
		return len(s3.Keys(t, hint)) == 1
	})
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	props := iceberg.Properties{
		"allow-unsafe-commits":             "true", // the hadoop catalog wants it on S3, even to read
		icebergio.S3EndpointURL:            s3.Endpoint(),
		icebergio.S3Region:                 testRegion,
		icebergio.S3ForceVirtualAddressing: "false",
	}
	checkEveryAckedRow(t, readPublished(t, cfg.Published, props, "trades"), frames*per)

	// The secret went nowhere but the environment: not into the log, not
	// into a log line.
	logDir := logDirOf(t, cfg, "trades")
	for _, name := range []string{logstore.BufferFile, logstore.BufferFile + "-wal"} {
		b, err := os.ReadFile(filepath.Join(logDir, name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if strings.Contains(string(b), s3.Secret) {
			t.Errorf("%s holds the S3 secret", name)
		}
	}
	if strings.Contains(logs.String(), s3.Secret) {
		t.Error("serve's log holds the S3 secret")
	}
}

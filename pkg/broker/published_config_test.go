package broker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/schema"
)

func TestServeCreatesLogsWithTheConfiguredStorage(t *testing.T) {
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1]
	pub := filepath.Join(t.TempDir(), "pub")
	cfg.Published = "file://" + pub
	cfg.Tiers = config.Tiers{TargetSealBytes: 1 << 20, StagingRetention: 3 * time.Minute, DeleteGrace: 7 * time.Second}
	srv := startServer(t, cfg)
	got := srv.reg.Get("trades").log.Config()
	loc, err := srv.reg.Get("trades").log.PublishedLocation()
	if err != nil {
		t.Fatal(err)
	}
	if got.Published != pub || loc != filepath.Join(pub, "trades", "trades") {
		t.Fatalf("the log publishes to %q (stored %q), want %s/trades/trades", loc, got.Published, pub)
	}
	if got.TargetSealBytes != 1<<20 || got.StagingRetention != 3*time.Minute || got.DeleteGrace != 7*time.Second ||
		got.TargetFileBytes != logstore.DefaultTargetFileBytes || got.LocalDeleteGrace != logstore.DefaultLocalDeleteGrace {
		t.Fatalf("the log stores %+v", got)
	}
}

func TestServeRefusesToMoveALogsPublishedTable(t *testing.T) {
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1]
	first := filepath.Join(t.TempDir(), "first")
	cfg.Published = first
	srv := startServer(t, cfg)
	_ = srv.Close()

	run := func(c config.Config) (string, error) {
		t.Helper()
		logs := &testkit.SyncBuffer{}
		s, err := New(c, Options{Logger: log.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- s.Run(ctx) }()
		select {
		case err := <-errc:
			return logs.String(), err
		case <-s.Ready():
			cancel()
			err := <-errc
			return logs.String(), err
		}
	}

	for _, moved := range []string{"", "file:///elsewhere/pub", "s3://bucket/pub"} {
		c := cfg
		c.Published = moved
		if strings.HasPrefix(moved, "s3://") {
			c.S3.Region = "eu-west-1"
		}
		_, err := run(c)
		want := moved
		if moved == "" {
			want = "the default <root>/published (" + filepath.Join(cfg.Root, meta.PublishedDir) + ")"
		} else if strings.HasPrefix(moved, "file://") {
			want = "/elsewhere/pub"
		}
		if err == nil || !strings.Contains(err.Error(), "publishes to "+first) || !strings.Contains(err.Error(), "the config's published: is "+want) ||
			!strings.Contains(err.Error(), "never moves") {
			t.Fatalf("published %q: got %v, want a refusal naming %s and %s", moved, err, first, want)
		}
	}
	// The same place, spelled another way, is the same table; settings the
	// log keeps are reported, not applied.
	c := cfg
	c.Published = "file://" + first + "/"
	c.Tiers.StagingRetention = 5 * time.Hour
	c.Streams = []config.Stream{cfg.Streams[0]}
	c.Streams[0].SortBy = []string{"event_ts"}
	logs, err := run(c)
	if err != nil {
		t.Fatalf("the same prefix as a file:// URL: %v", err)
	}
	for _, want := range []string{"the log keeps the sizes and sort order it was created with", "tiers.staging_retention: the log keeps 1h0m0s, the config says 5h0m0s", "sort_by: the log keeps [], the config says [", "event_ts"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}
}

func TestServeAcceptsTheDefaultPrefixSpelledOut(t *testing.T) {
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1]
	srv := startServer(t, cfg) // stores "": <root>/published
	_ = srv.Close()
	cfg.Published = "file://" + filepath.Join(cfg.Root, meta.PublishedDir)
	srv = startServer(t, cfg)
	if loc, _ := srv.reg.Get("trades").log.PublishedLocation(); loc != filepath.Join(cfg.Root, meta.PublishedDir, "trades", "trades") {
		t.Fatalf("published location %s", loc)
	}
	_ = srv.Close()
	cfg.Published = filepath.Join(cfg.Root, "elsewhere")
	s, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "leave published: out (or set it to "+filepath.Join(cfg.Root, meta.PublishedDir)+")") {
		t.Fatalf("got %v, want a refusal telling to leave published: out", err)
	}
}

func TestServeRefusesOtherS3SettingsThanTheLogKeeps(t *testing.T) {
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1]
	dir := logDirOf(t, cfg, "trades")
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	sch, err := schema.Compile([]byte(config.DemoSchema))
	if err != nil {
		t.Fatal(err)
	}
	l, err := logstore.Create(dir, sch, logstore.Config{Stream: "trades", Log: "trades", Published: "s3://bucket/p", S3: warehouse.S3{Endpoint: "http://127.0.0.1:7070", Region: "us-east-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Published = "s3://bucket/p/"
	cfg.S3 = warehouse.S3{Endpoint: "http://127.0.0.1:7071", Region: "us-east-1"}
	s, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Run(t.Context())
	for _, want := range []string{`with s3: {endpoint: "http://127.0.0.1:7070", region: "us-east-1", path_style: true}`,
		`the config's s3: is {endpoint: "http://127.0.0.1:7071"`, "set s3: back"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want an error containing %q", err, want)
		}
	}
}

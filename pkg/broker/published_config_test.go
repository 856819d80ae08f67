package broker

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
)

func TestStorageSectionsParseIntoTheLogConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
published: s3://bucket/some/path/
s3: {endpoint: "http://127.0.0.1:7070", region: eu-west-1, path_style: true}
tiers:
  target_seal_bytes: 64KiB
  target_file_bytes: 1MB
  staging_retention: 2h
  staging_max_bytes: 1073741824
  published_snapshot_retention: 30m
  delete_grace: null
  local_delete_grace: 5s
streams: [{name: a, schema: {type: object, properties: {x: {type: integer}}, required: [x]}, sort_by: [x]}]
`), "")
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	lc, err := cfg.logConfig(cfg.Streams[0], "a-v2")
	if err != nil {
		t.Fatal(err)
	}
	if lc.Stream != "a" || lc.Log != "a-v2" {
		t.Fatalf("the log config names stream %q, log %q; want a, a-v2", lc.Stream, lc.Log)
	}
	want := logstore.Config{
		SortBy:                     []string{"x"},
		TargetSealBytes:            64 << 10,
		Published:                  "s3://bucket/some/path",
		S3:                         logstore.S3Config{Endpoint: "http://127.0.0.1:7070", Region: "eu-west-1", PathStyle: true},
		TargetFileBytes:            1_000_000,
		StagingRetention:           2 * time.Hour,
		StagingMaxBytes:            1 << 30,
		PublishedSnapshotRetention: 30 * time.Minute,
		LocalDeleteGrace:           5 * time.Second,
	}
	if lc.Published != want.Published || lc.S3 != want.S3 || lc.TargetSealBytes != want.TargetSealBytes || lc.TargetFileBytes != want.TargetFileBytes ||
		lc.StagingRetention != want.StagingRetention || lc.StagingMaxBytes != want.StagingMaxBytes ||
		lc.PublishedSnapshotRetention != want.PublishedSnapshotRetention || lc.DeleteGrace != 0 || lc.LocalDeleteGrace != want.LocalDeleteGrace ||
		strings.Join(lc.SortBy, ",") != "x" {
		t.Fatalf("log config\n%+v, want\n%+v", lc, want)
	}

	// Local prefixes: a file:// URL and a directory are stored as the
	// absolute directory; a relative one is resolved like root, against
	// the working directory; none stores the default <root>/published
	// relative to the log's directory, so a root moved whole keeps its
	// tables beside it.
	wd, _ := os.Getwd()
	for _, tc := range []struct{ published, stored string }{
		{"", "../../published"},
		{"file:///srv/pub/", "/srv/pub"},
		{"file://localhost/srv/pub", "/srv/pub"},
		{"/srv/pub", "/srv/pub"},
		{"pub/tables", filepath.Join(wd, "pub", "tables")},
	} {
		cfg, err := ParseConfig([]byte("published: "+tc.published+"\nstreams: [{name: a}]"), "")
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			t.Fatalf("published %q: %v", tc.published, err)
		}
		lc, err := cfg.logConfig(cfg.Streams[0], "a")
		if err != nil || lc.Published != tc.stored || lc.S3 != (logstore.S3Config{}) {
			t.Fatalf("published %q: stored %+v (%v), want %q", tc.published, lc, err, tc.stored)
		}
	}
}

func TestStorageSectionErrorsNameTheKey(t *testing.T) {
	const secret = "wJalrXUtnFEMI-K7MDENG"
	cases := []struct{ name, yaml, want string }{
		{"unknown s3 key", "s3: {endpont: x}", "unknown key s3.endpont (known here: endpoint, region, path_style)"},
		{"secret in s3", "published: s3://b/p\ns3: {secret_access_key: " + secret + "}", "key s3.secret_access_key: credentials are never config"},
		{"access key in s3", "published: s3://b/p\ns3: {access_key: AKIA}", "AWS_ACCESS_KEY_ID"},
		{"secret at the top", "aws_secret_access_key: " + secret, "key aws_secret_access_key: credentials are never config"},
		{"credentials in the prefix", "published: s3://AKIA:" + secret + "@bucket/p", "published names credentials in its URL"},
		{"credentials in the endpoint", "published: s3://b/p\ns3: {endpoint: 'http://AKIA:" + secret + "@127.0.0.1:7070'}", "s3.endpoint names credentials"},
		{"unknown tiers key", "tiers: {staging_retension: 1h}", "unknown key tiers.staging_retension"},
		{"another scheme", "published: gs://bucket/p", "has scheme gs://, which streamcast cannot publish to"},
		{"no bucket", "published: s3:///p", "names no bucket"},
		{"relative file URL", "published: file://pub", "is not a file:// URL of an absolute directory"},
		{"root directory", "published: /", "is the root directory"},
		{"tilde", "published: ~/pub", "starts with ~"},
		{"s3 without an s3 prefix", "s3: {region: eu-west-1}", "s3: is set, but published is the default <root>/published"},
		{"endpoint not a URL", "published: s3://b/p\ns3: {endpoint: localhost:7070}", `s3.endpoint "localhost:7070" is not an http:// or https:// URL`},
		{"size without meaning", "tiers: {target_file_bytes: lots}", `tiers.target_file_bytes: "lots" is not a size`},
		{"size with an unknown unit", "tiers: {target_file_bytes: 5PB}", `tiers.target_file_bytes: "5PB" is not a size`},
		{"size too large", "tiers: {staging_max_bytes: 9000000TiB}", "is too large"},
		{"negative size", "tiers: {staging_max_bytes: -1}", "tiers.staging_max_bytes is negative"},
		{"duration without unit", "tiers: {delete_grace: 60}", "tiers.delete_grace: 60 has no unit"},
		{"negative duration", "tiers: {staging_retention: -1h}", "tiers.staging_retention is negative"},
		{"tiers not a mapping", "tiers: big", "tiers is a mapping of target_seal_bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tc.yaml+"\nstreams: [{name: a}]\n"), "")
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error repeats the secret: %v", err)
			}
		})
	}
}

func TestServeCreatesLogsWithTheConfiguredStorage(t *testing.T) {
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1]
	pub := filepath.Join(t.TempDir(), "pub")
	cfg.Published = "file://" + pub
	cfg.Tiers = TierConfig{TargetSealBytes: 1 << 20, StagingRetention: 3 * time.Minute, DeleteGrace: 7 * time.Second}
	srv := startServer(t, cfg)
	got := srv.reg.get("trades").log.Config()
	loc, err := srv.reg.get("trades").log.PublishedLocation()
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

	run := func(c Config) (string, error) {
		t.Helper()
		logs := &lockedBuffer{}
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
			want = "the default <root>/published (" + filepath.Join(cfg.Root, "published") + ")"
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
	c.Streams = []StreamConfig{cfg.Streams[0]}
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
	cfg.Published = "file://" + filepath.Join(cfg.Root, "published")
	srv = startServer(t, cfg)
	if loc, _ := srv.reg.get("trades").log.PublishedLocation(); loc != filepath.Join(cfg.Root, "published", "trades", "trades") {
		t.Fatalf("published location %s", loc)
	}
	_ = srv.Close()
	cfg.Published = filepath.Join(cfg.Root, "elsewhere")
	s, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "leave published: out (or set it to "+filepath.Join(cfg.Root, "published")+")") {
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
	sch, err := schema.Compile([]byte(DemoSchema))
	if err != nil {
		t.Fatal(err)
	}
	l, err := logstore.Create(dir, sch, logstore.Config{Published: "s3://bucket/p", S3: logstore.S3Config{Endpoint: "http://127.0.0.1:7070", Region: "us-east-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Published = "s3://bucket/p/"
	cfg.S3 = logstore.S3Config{Endpoint: "http://127.0.0.1:7071", Region: "us-east-1"}
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

// lockedBuffer is a log destination read while a server writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

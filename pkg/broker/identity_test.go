//go:build linux

package broker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// identityConfig is testConfig with trades published outside the root:
// under a directory (file) or on versitygw (s3), and the reader of what
// is published there.
func identityConfig(t *testing.T, kind string, srv *testkit.S3Server) (config.Config, func(uri string) ([]byte, error)) {
	cfg := testConfig(t)
	switch kind {
	case "file":
		cfg.Published = "file://" + filepath.Join(t.TempDir(), "pub")
		return cfg, func(uri string) ([]byte, error) {
			u, err := url.Parse(uri)
			if err != nil || u.Scheme != "file" {
				return nil, errors.New("not a file:// URI: " + uri)
			}
			return os.ReadFile(u.Path)
		}
	}
	cfg.Published = "s3://" + testkit.Bucket + "/" + strings.ReplaceAll(t.Name(), "/", "_")
	cfg.S3 = warehouse.S3{Endpoint: srv.Endpoint(), Region: testkit.Region, PathStyle: true}
	return cfg, func(uri string) ([]byte, error) {
		u, err := url.Parse(uri)
		if err != nil || u.Scheme != "s3" {
			return nil, errors.New("not an s3:// URI: " + uri)
		}
		out, err := srv.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(u.Host), Key: aws.String(strings.TrimPrefix(u.Path, "/"))})
		if err != nil {
			return nil, err
		}
		defer out.Body.Close()
		return io.ReadAll(out.Body)
	}
}

// serveOnce runs a server for cfg, publishes n trades to it (numbered
// from first), and stops it; it returns the greeting's stream_id and the
// offsets acknowledged.
func serveOnce(t *testing.T, cfg config.Config, first, n int) (string, []int64) {
	t.Helper()
	srv, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(context.Background()) }()
	select {
	case <-srv.Ready():
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("server not ready after 20s")
	}
	p := dialPublisher(t, srv, "trades")
	var acked []int64
	for i := range n {
		r := p.roundTrip(trade(first + i))
		if r.Error != "" || len(r.OK) != 1 {
			t.Fatalf("publish: %+v", r)
		}
		acked = append(acked, r.OK[0])
	}
	id := p.g.StreamID
	p.ws.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	return id, acked
}

// refusedStart runs a server for cfg that must refuse to start.
func refusedStart(t *testing.T, cfg config.Config) error {
	t.Helper()
	srv, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(context.Background()) }()
	select {
	case <-srv.Ready():
		_ = srv.Close()
		<-errc
		t.Fatal("serve started and was ready to acknowledge offsets")
	case err := <-errc:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("serve neither started nor refused within 20s")
	}
	return nil
}

// TestServeRefusesAnEmptyRootOverPublishedHistory closes a data-loss
// hole: the root is lost, the published prefix survives; serve must not
// acknowledge offsets 1, 2, … again.
func TestServeRefusesAnEmptyRootOverPublishedHistory(t *testing.T) {
	srv := startS3(t)
	srv.UseCredentials(t)
	for _, kind := range []string{"file", "s3"} {
		t.Run(kind, func(t *testing.T) {
			cfg, _ := identityConfig(t, kind, srv)
			id, acked := serveOnce(t, cfg, 0, 5)
			if id == "" || len(acked) != 5 || acked[0] != 1 {
				t.Fatalf("first run: id %q, acked %v", id, acked)
			}
			if err := os.RemoveAll(cfg.Root); err != nil {
				t.Fatal(err)
			}
			err := refusedStart(t, cfg)
			if !errors.Is(err, meta.ErrExistingHistory) || !strings.Contains(err.Error(), id) {
				t.Fatalf("serve on an empty root: %v; want a refusal naming the published stream_id %s", err, id)
			}
			if _, err := os.Stat(filepath.Join(cfg.Root, "trades", "trades", logstore.BufferFile)); !os.IsNotExist(err) {
				t.Fatalf("the refused start created a log: %v", err)
			}
		})
		// Only a table is left at the prefix (its metadata is gone too):
		// the listing finds it.
		t.Run(kind+"/only a table", func(t *testing.T) {
			cfg, _ := identityConfig(t, kind, srv)
			lay, err := meta.NewLayout(cfg.Root, cfg.Published)
			if err != nil {
				t.Fatal(err)
			}
			table := lay.TableLocation("trades", "trades") + "/metadata/v1.metadata.json"
			if kind == "file" {
				if err := os.MkdirAll(filepath.Dir(table), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(table, []byte("{}"), 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				u, _ := url.Parse(table)
				if _, err := srv.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(u.Host),
					Key: aws.String(strings.TrimPrefix(u.Path, "/")), Body: strings.NewReader("{}")}); err != nil {
					t.Fatal(err)
				}
			}
			err = refusedStart(t, cfg)
			if !errors.Is(err, meta.ErrExistingHistory) || !strings.Contains(err.Error(), "the table(s) trades") {
				t.Fatalf("serve on an empty root over a published table: %v", err)
			}
		})
	}
}

// TestServeAdoptsLostMetadataAndGoesOn: the root lost the stream's
// metadata but kept its log; serve keeps the id and the offsets go on.
func TestServeAdoptsLostMetadataAndGoesOn(t *testing.T) {
	srv := startS3(t)
	srv.UseCredentials(t)
	for _, kind := range []string{"file", "s3"} {
		t.Run(kind, func(t *testing.T) {
			cfg, _ := identityConfig(t, kind, srv)
			id, acked := serveOnce(t, cfg, 0, 3)
			lay, err := meta.NewLayout(cfg.Root, cfg.Published)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(lay.MetadataDir("trades")); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(lay.MetadataFile("trades")); err != nil {
				t.Fatal(err)
			}
			id2, acked2 := serveOnce(t, cfg, 3, 3)
			if id2 != id || acked2[0] != acked[len(acked)-1]+1 {
				t.Fatalf("after losing the metadata: id %s (was %s), offsets %v after %v", id2, id, acked2, acked)
			}
		})
	}
}

// TestGreetingNamesTheStreamsMetadata: the greeting carries stream_id and
// the URIs of the published plain copy and hint; an independent reader
// follows the hint to the current version. A live-only stream has none.
func TestGreetingNamesTheStreamsMetadata(t *testing.T) {
	s3srv := startS3(t)
	s3srv.UseCredentials(t)
	for _, kind := range []string{"file", "s3"} {
		t.Run(kind, func(t *testing.T) {
			cfg, read := identityConfig(t, kind, s3srv)
			srv := startServer(t, cfg)
			_, g := mustDial(t, wsURL(srv, "/trades"))
			scheme := kind + "://"
			if !strings.HasPrefix(g.Metadata, scheme) || !strings.HasPrefix(g.MetadataHint, scheme) || g.StreamID == "" {
				t.Fatalf("greeting: stream_id %q, metadata %q, metadata_hint %q", g.StreamID, g.Metadata, g.MetadataHint)
			}
			if strings.Contains(g.Metadata+g.MetadataHint, s3srv.Secret) || strings.Contains(g.Metadata+g.MetadataHint, s3srv.Access) {
				t.Fatal("the greeting carries a credential")
			}
			hint, err := read(g.MetadataHint)
			if err != nil {
				t.Fatalf("read the hint %s: %v", g.MetadataHint, err)
			}
			n := strings.TrimSpace(string(hint))
			version, err := read(strings.TrimSuffix(g.MetadataHint, meta.HintFile) + "v" + n + ".metadata.json")
			if err != nil {
				t.Fatalf("follow the hint to v%s: %v", n, err)
			}
			plain, err := read(g.Metadata)
			if err != nil || string(plain) != string(version) {
				t.Fatalf("the plain copy %s (%v) is not v%s", g.Metadata, err, n)
			}
			var m struct {
				StreamID string `json:"stream_id"`
				Logs     []struct {
					Name, State string
				}
			}
			if err := json.Unmarshal(version, &m); err != nil || m.StreamID != g.StreamID || len(m.Logs) != 1 || m.Logs[0].Name != "trades" || m.Logs[0].State != "live" {
				t.Fatalf("v%s reads %+v (%v); want stream_id %s and the live log trades", n, m, err, g.StreamID)
			}
			_, lg := mustDial(t, wsURL(srv, "/live"))
			if lg.StreamID != "" || lg.Metadata != "" || lg.MetadataHint != "" {
				t.Fatalf("a live-only stream's greeting names metadata: %+v", lg)
			}
		})
	}
}

// TestServeRefusesPublishersOfARetiredStream: a retirement recorded in the
// metadata closes publishers with 4410 and both numbers; subscribers are
// still greeted.
func TestServeRefusesPublishersOfARetiredStream(t *testing.T) {
	cfg := testConfig(t)
	serveOnce(t, cfg, 0, 2)
	lay, err := meta.NewLayout(cfg.Root, cfg.Published)
	if err != nil {
		t.Fatal(err)
	}
	st, err := meta.NewStore(context.Background(), lay, "trades", cfg.S3)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m.Retirement = &meta.Retirement{At: 1_700_000_000_000_000, EndOffset: 3}
	m.Logs[0].State = meta.Retired
	if _, err := st.Commit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, cfg)
	_, _, err = dial(t, wsURL(srv, "/trades?publish"))
	code, reason := closeOf(err)
	if code != wire.CloseRetired || !strings.Contains(reason, `"end_offset":3`) || !strings.Contains(reason, `"at":1700000000000000`) {
		t.Fatalf("publisher of a retired stream: %v (%d %s); want 4410 with at and end_offset", err, code, reason)
	}
	if _, g := mustDial(t, wsURL(srv, "/trades?offset=1")); g.EndOffset != 3 {
		t.Fatalf("subscriber greeting: %+v", g)
	}
}

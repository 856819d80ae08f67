package meta

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
)

func TestLogNameNamesLaterLogsAfterTheStream(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "trades"}, {1, "trades"}, {2, "trades-v2"}, {3, "trades-v3"}, {12, "trades-v12"}} {
		if got := LogName("trades", tc.n); got != tc.want {
			t.Errorf("LogName(trades, %d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestLayoutPlacesEveryPath(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, root, published string
		wantPrefix            string
		wantDefault           bool
		stored                string // what a new log of trades/trades-v2 stores
	}{
		{"default prefix", "/srv/data", "", "/srv/data/published", true, "../../published"},
		{"relative root, default prefix", "data", "", filepath.Join(wd, "data", "published"), true, "../../published"},
		{"directory prefix", "/srv/data", "/srv/pub", "/srv/pub", false, "/srv/pub"},
		{"file URL prefix", "/srv/data", "file:///srv/pub/", "/srv/pub", false, "/srv/pub"},
		{"relative prefix, against the working directory", "/srv/data", "pub", filepath.Join(wd, "pub"), false, filepath.Join(wd, "pub")},
		{"s3 prefix", "/srv/data", "s3://bucket/tables/", "s3://bucket/tables", false, "s3://bucket/tables"},
		{"the default spelled out", "/srv/data", "/srv/data/published", "/srv/data/published", false, "/srv/data/published"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lay, err := NewLayout(tc.root, tc.published)
			if err != nil {
				t.Fatal(err)
			}
			r := tc.root
			for _, p := range []struct{ got, want string }{
				{lay.Root(), r},
				{lay.StreamDir("trades"), filepath.Join(r, "trades")},
				{lay.LogDir("trades", "trades"), filepath.Join(r, "trades", "trades")},
				{lay.LogDir("trades", LogName("trades", 2)), filepath.Join(r, "trades", "trades-v2")},
				{lay.MetadataDir("trades"), filepath.Join(r, "trades", "trades.metadata")},
				{lay.MetadataFile("trades"), filepath.Join(r, "trades", "trades.metadata.json")},
				{lay.Published().String(), tc.wantPrefix},
				{lay.TableLocation("trades", "trades-v2"), tc.wantPrefix + "/trades/trades-v2"},
				{lay.StoredPublished("trades", "trades-v2"), tc.stored},
			} {
				if p.got != p.want {
					t.Errorf("got %q, want %q", p.got, p.want)
				}
			}
			if lay.DefaultPublished() != tc.wantDefault {
				t.Errorf("DefaultPublished() = %t, want %t", lay.DefaultPublished(), tc.wantDefault)
			}
		})
	}
	if _, err := NewLayout("/srv/data", "gs://bucket"); err == nil || !strings.Contains(err.Error(), "gs://") {
		t.Fatalf("NewLayout with a gs:// prefix: %v", err)
	}
}

func TestLayoutCheckRefusesPrefixesThatOverlapStreams(t *testing.T) {
	cases := []struct {
		name, root, published string
		streams               []string
		want                  string // "" = accepted
	}{
		{"default", "/srv/data", "", []string{"trades"}, ""},
		{"elsewhere", "/srv/data", "/srv/pub", []string{"trades"}, ""},
		{"s3", "/srv/data", "s3://b/p", []string{"trades"}, ""},
		{"inside the root, not a stream", "/srv/data", "/srv/data/tables", []string{"trades"}, ""},
		{"the root itself", "/srv/data", "/srv/data", []string{"trades"}, "is the root /srv/data itself"},
		{"the root spelled as a URL", "/srv/data", "file:///srv/data/", nil, "is the root /srv/data itself"},
		{"a stream's home", "/srv/data", "/srv/data/trades", []string{"trades"}, `inside the home of stream "trades"`},
		{"inside a stream's home", "/srv/data", "/srv/data/trades/pub", []string{"quotes", "trades"}, `inside the home of stream "trades"`},
		{"a stream's home in another case", "/srv/data", "/srv/data/Trades", []string{"trades"}, `inside the home of stream "trades"`},
		{"root where a stream's tables go", "/srv/pub/trades", "/srv/pub", []string{"trades"}, `where stream "trades"'s tables would go`},
		{"root deeper under a stream's tables", "/srv/pub/trades/x", "/srv/pub", []string{"trades"}, `where stream "trades"'s tables would go`},
		{"root under the prefix, no stream there", "/srv/pub/data", "/srv/pub", []string{"trades"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lay, err := NewLayout(tc.root, tc.published)
			if err != nil {
				t.Fatal(err)
			}
			err = lay.Check(tc.streams)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Check = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestTheDefaultPrefixAgreesWithLogstore pins that a log created in the
// layout publishes where the layout says, both for what serve stores in a
// new log (StoredPublished) and for what older logs stored (""), whose
// meaning logstore keeps on its own.
func TestTheDefaultPrefixAgreesWithLogstore(t *testing.T) {
	root := t.TempDir()
	lay, err := NewLayout(root, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ stream, log, stored string }{
		{"trades", "trades", lay.StoredPublished("trades", "trades")},
		{"quotes", LogName("quotes", 2), lay.StoredPublished("quotes", LogName("quotes", 2))},
		{"old", "old", ""},
	} {
		dir := lay.LogDir(tc.stream, tc.log)
		if err := os.MkdirAll(lay.StreamDir(tc.stream), 0o755); err != nil {
			t.Fatal(err)
		}
		l, err := logstore.Create(dir, schema.Any(), logstore.Config{Stream: tc.stream, Log: tc.log, Published: tc.stored})
		if err != nil {
			t.Fatal(err)
		}
		loc, err := l.PublishedLocation()
		_ = l.Close()
		if err != nil || loc != lay.TableLocation(tc.stream, tc.log) {
			t.Fatalf("%s/%s stored %q: logstore publishes to %q (%v), the layout says %q", tc.stream, tc.log, tc.stored, loc, err, lay.TableLocation(tc.stream, tc.log))
		}
	}
}

// TestAMovedLogPublishesToTheTableItsNamesName creates a log in the layout,
// moves its whole root (and a second log to another stream's place), and
// publishes: each table is named by the stream and log names the log
// stored at Create, not by where its directory now sits.
func TestAMovedLogPublishesToTheTableItsNamesName(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	pub := filepath.Join(tmp, "pub")
	lay, err := NewLayout(filepath.Join(tmp, "a"), pub)
	if err != nil {
		t.Fatal(err)
	}
	dir := lay.LogDir("trades", "trades")
	if err := os.MkdirAll(lay.StreamDir("trades"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := logstore.Create(dir, schema.Any(), logstore.Config{Stream: "trades", Log: "trades", Published: lay.StoredPublished("trades", "trades")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, [][]byte{[]byte(`{"n":1}`), []byte(`{"n":2}`)}, time.Now().UnixMicro(), nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// Move it to where another stream's other log would sit.
	moved := filepath.Join(tmp, "b", "other", "elsewhere")
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	m, err := logstore.Open(moved, logstore.Writer)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if c := m.Config(); c.Stream != "trades" || c.Log != "trades" {
		t.Fatalf("the moved log names stream %q, log %q; want trades, trades", c.Stream, c.Log)
	}
	if _, err := m.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if n, err := m.Publish(ctx, true); err != nil || n != 2 {
		t.Fatalf("publish: %d rows, %v; want 2", n, err)
	}
	loc, err := m.PublishedLocation()
	if err != nil || loc != lay.TableLocation("trades", "trades") {
		t.Fatalf("the moved log publishes to %q (%v), want %q", loc, err, lay.TableLocation("trades", "trades"))
	}
	if _, err := os.Stat(filepath.Join(pub, "trades", "trades", "metadata", "version-hint.text")); err != nil {
		t.Fatalf("no table at its stored names: %v", err)
	}
	if _, err := os.Stat(filepath.Join(pub, "other")); !os.IsNotExist(err) {
		t.Fatalf("the moved log published under its new directory's names: %v", err)
	}
}

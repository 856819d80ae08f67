package broker

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/schema"
)

// BenchmarkTimeToGreeting measures a subscribe, dial to greeting, on a
// stream whose log has one sealed file and on one with 10,000: the
// stream's metadata is read once when the stream opens and cached, so the
// number of files must not show (at most 10% apart). The files
// are tiny (one row each, cut by a one-byte seal target) and made once per
// run of the benchmark.
func BenchmarkTimeToGreeting(b *testing.B) {
	counts := []int{1, 10_000}
	urls := make([]string, len(counts))
	// Both servers run before either is measured, so neither is measured
	// on a colder machine than the other.
	for i, files := range counts {
		cfg := testConfig(b)
		cfg.Streams = cfg.Streams[:1]
		makeSealedLog(b, cfg, files)
		urls[i] = wsURL(startServer(b, cfg), "/trades")
	}
	for i, files := range counts {
		b.Run("files="+strconv.Itoa(files), func(b *testing.B) {
			d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
			for b.Loop() {
				ws, _, err := d.Dial(urls[i], nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := ws.ReadMessage(); err != nil {
					b.Fatal(err)
				}
				ws.Close()
			}
		})
	}
}

// makeSealedLog creates the first log of trades under cfg's root with n
// sealed files of one row each.
func makeSealedLog(b *testing.B, cfg config.Config, n int) {
	b.Helper()
	ctx := context.Background()
	lay, err := meta.NewLayout(cfg.Root, cfg.Published)
	if err != nil {
		b.Fatal(err)
	}
	dir := lay.LogDir("trades", meta.LogName("trades", 1))
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		b.Fatal(err)
	}
	sch, err := schema.Compile([]byte(config.DemoSchema))
	if err != nil {
		b.Fatal(err)
	}
	lc, err := cfg.LogSettings(cfg.Streams[0], "trades")
	if err != nil {
		b.Fatal(err)
	}
	lc.TargetSealBytes = 1 // a file per commit group
	lg, err := logstore.Create(dir, sch, lc)
	if err != nil {
		b.Fatal(err)
	}
	defer lg.Close()
	for i := range n {
		row, err := sch.AppendCanonical(nil, []byte(trade(i)))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := lg.Append(ctx, [][]byte{row}, 1_700_000_000_000_000+int64(i), nil); err != nil {
			b.Fatal(err)
		}
	}
	for sealed := int64(0); sealed < int64(n); {
		k, err := lg.Seal(ctx, true)
		if err != nil {
			b.Fatal(err)
		}
		if k == 0 {
			b.Fatalf("seal stopped after %d of %d rows", sealed, n)
		}
		sealed += k
	}
	files, err := os.ReadDir(filepath.Join(dir, logstore.FilesDir))
	if err != nil || len(files) < n {
		b.Fatalf("the log has %d files (%v), want %d", len(files), err, n)
	}
}

package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// logDirOf returns where serve keeps the current log of stream under cfg,
// as pkg/meta lays it out.
func logDirOf(t testing.TB, cfg config.Config, stream string) string {
	t.Helper()
	lay, err := meta.NewLayout(cfg.Root, cfg.Published)
	if err != nil {
		t.Fatal(err)
	}
	return lay.LogDir(stream, meta.LogName(stream, 1))
}

// TestServeKeepsAMovedLogsTableAndSaysSo moves a stream's log to where
// another stream's would be: serve opens it, warns that it belongs to the
// first stream, and the log keeps publishing to the first stream's table.
func TestServeKeepsAMovedLogsTableAndSaysSo(t *testing.T) {
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1]
	srv := startServer(t, cfg)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	from, to := logDirOf(t, cfg, "trades"), logDirOf(t, cfg, "quotes")
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
	cfg.Streams[0].Name = "quotes"
	logs := &testkit.SyncBuffer{}
	srv = startServer(t, cfg, Options{Logger: log.New(logs)})
	loc, err := srv.reg.Get("quotes").log.PublishedLocation()
	if err != nil || loc != filepath.Join(cfg.Root, meta.PublishedDir, "trades", "trades") {
		t.Fatalf("the moved log publishes to %s (%v), want <root>/published/trades/trades", loc, err)
	}
	if want := `names: the log belongs to stream \"trades\" as log \"trades\"`; !strings.Contains(logs.String(), want) {
		t.Fatalf("serve did not say the log belongs to another stream (%s):\n%s", want, logs.String())
	}
}

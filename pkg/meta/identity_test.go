//go:build linux

package meta

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
)

// TestDescribeLogNamesALogByWhatItStores: a log sitting in a directory
// named otherwise is described by the names it stores, its name in the
// metadata and its table's location both.
func TestDescribeLogNamesALogByWhatItStores(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "somewhere", "else")
	pub := filepath.Join(tmp, "pub")
	lg, err := logstore.Create(dir, schema.Any(), logstore.Config{Stream: "trades", Log: "trades-v2", Published: pub})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	d, err := DescribeLog(lg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := fileURI(filepath.Join(pub, "trades", "trades-v2")); d.Name != "trades-v2" || d.Location != want {
		t.Fatalf("described as %q at %s; want trades-v2 at %s, whatever its directory is called", d.Name, d.Location, want)
	}
}

// TestRetainLogTakesItsStreamFromTheLogNeverItsDirectory: the log of
// stream quotes, moved to where stream trades keeps its current log, is
// still quotes' log. The retain role, which knows the log only by its
// directory, refuses it, naming quotes, rather than run trades' window
// over it; trades' metadata and the log are left as they were.
func TestRetainLogTakesItsStreamFromTheLogNeverItsDirectory(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	e := testEnv{kind: "file", root: filepath.Join(tmp, "root")}
	trades, clk, tradesDir, _ := agedStream(t, e, "trades")
	_, _, quotesDir, _ := agedStream(t, e, "quotes")
	if _, _, err := SetMaxAge(ctx, trades, "2h"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tradesDir, filepath.Join(tmp, "aside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(quotesDir, tradesDir); err != nil {
		t.Fatal(err)
	}

	lg, err := logstore.Open(tradesDir, logstore.Maintainer, logstore.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	r, err := RetainLog(ctx, lg, RetainOptions{Clock: clk.Now})
	_ = lg.Close()
	if err == nil || !strings.Contains(err.Error(), `stream "quotes"`) || r.Moved {
		t.Fatalf("RetainLog of quotes' log in trades' home: %+v, %v; want a refusal naming stream quotes", r, err)
	}
	m, err := trades.Load(ctx)
	if err != nil || m.Retention.Floor != nil {
		t.Fatalf("trades' metadata after the refusal: %+v, %v; want no floor", m, err)
	}
	if earliest, _ := logState(t, tradesDir); earliest != 1 {
		t.Fatalf("the moved log's earliest offset is %d after the refusal; want 1", earliest)
	}
}

// TestAnUpgradedLogWithoutNamesIsNamedByTheLayoutNeverItsDirectory: a log
// made before logs stored their names, in a home without metadata, is
// recorded under the name the layout found it by, its table under the
// stream's; a read-only handle given no names still has none.
func TestAnUpgradedLogWithoutNamesIsNamedByTheLayoutNeverItsDirectory(t *testing.T) {
	ctx := context.Background()
	e := testEnv{kind: "file", root: filepath.Join(t.TempDir(), "root")}
	lay := e.layout(t)
	dir := lay.LogDir("trades", "trades")
	lg, err := logstore.Create(dir, schema.Any(), logstore.Config{Stream: "trades", Log: "trades", Published: lay.StoredPublished("trades", "trades")})
	if err != nil {
		t.Fatal(err)
	}
	_ = lg.Close()
	// Its stored config as a build before names has it.
	db, err := sql.Open("sqlite", filepath.Join(dir, logstore.BufferFile))
	if err != nil {
		t.Fatal(err)
	}
	var raw string
	if err := db.QueryRow(`SELECT v FROM meta WHERE k = 'config'`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{}
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	delete(cfg, "stream")
	delete(cfg, "log")
	b, _ := json.Marshal(cfg)
	if _, err := db.Exec(`UPDATE meta SET v = ? WHERE k = 'config'`, string(b)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	res, err := Resolve(ctx, e.store(t, "trades"))
	if err != nil || res.Outcome != Upgraded {
		t.Fatalf("Resolve over a log without names or metadata: %+v, %v; want it upgraded", res, err)
	}
	cur := res.Metadata.Current()
	if want := fileURI(lay.TableLocation("trades", "trades")); cur.Name != "trades" || cur.Location != want {
		t.Fatalf("recorded as %q at %s; want trades at %s", cur.Name, cur.Location, want)
	}
	r, err := logstore.Open(dir, logstore.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := DescribeLog(r, 1); !errors.Is(err, logstore.ErrUnnamed) {
		t.Fatalf("DescribeLog of a log given no names: %v; want ErrUnnamed", err)
	}
}

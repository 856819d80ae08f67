package logstore

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/schema"
)

func TestCreateStoresTheNamesItIsGiven(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "somewhere", "else")
	l, err := Create(dir, schema.Any(), Config{Stream: "trades", Log: "trades-v2"})
	if err != nil {
		t.Fatal(err)
	}
	loc, err := l.PublishedLocation()
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	if want := filepath.Join(filepath.Dir(filepath.Dir(dir)), "published", "trades", "trades-v2"); loc != want {
		t.Fatalf("published location %s, want %s: the table is named by the stored names", loc, want)
	}
	r := openLog(t, dir, ReadOnly)
	if c := r.Config(); c.Stream != "trades" || c.Log != "trades-v2" {
		t.Fatalf("reopened names %q/%q, want trades/trades-v2", c.Stream, c.Log)
	}
}

// stripNames removes the stream and log names from the config stored in
// the log in dir, as a log created before logs stored them has it.
func stripNames(t *testing.T, dir string) {
	t.Helper()
	db, err := openDB(filepath.Join(dir, BufferFile), true, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var raw string
	if err := db.QueryRowContext(ctx, `SELECT v FROM meta WHERE k = 'config'`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "stream")
	delete(m, "log")
	m["a_field_of_a_later_build"] = 7
	b, _ := json.Marshal(m)
	if _, err := db.ExecContext(ctx, `UPDATE meta SET v = ? WHERE k = 'config'`, string(b)); err != nil {
		t.Fatal(err)
	}
}

// TestALogWithoutStoredNamesIsNamedByItsMetadataNeverItsDirectory: a log
// created before logs stored their names is not named by where it sits. A
// handle given no names has none, and what needs them (its published
// table) is refused, naming the way out; the names its stream's metadata
// gives it (WithNames) are taken, and stored by a writable open, so a
// later move renames nothing.
func TestALogWithoutStoredNamesIsNamedByItsMetadataNeverItsDirectory(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "root", "trades", "trades")
	l, err := Create(dir, schema.Any(), Config{Stream: "trades", Log: "trades", Published: filepath.Join(tmp, "pub")})
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	stripNames(t, dir)

	// Given no names, a handle has none, whatever the directory says.
	r, err := Open(dir, ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Config(); c.Stream != "" || c.Log != "" {
		t.Fatalf("a log storing no names opened as %q/%q; want none, never its directory's", c.Stream, c.Log)
	}
	if _, err := r.PublishedLocation(); !errors.Is(err, ErrUnnamed) || !strings.Contains(err.Error(), "streamcast serve") {
		t.Fatalf("published location of an unnamed log: %v; want ErrUnnamed naming the way out", err)
	}
	if _, _, err := r.Names(); !errors.Is(err, ErrUnnamed) {
		t.Fatalf("Names of an unnamed log: %v; want ErrUnnamed", err)
	}
	_ = r.Close()

	// Moved and given the metadata's names: a read-only handle takes
	// them and stores nothing.
	moved := filepath.Join(tmp, "root2", "quotes", "quotes")
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	r = openLog(t, moved, ReadOnly, WithNames("trades", "trades"))
	if s, n, err := r.Names(); s != "trades" || n != "trades" || err != nil {
		t.Fatalf("read-only open given trades/trades names %q/%q (%v)", s, n, err)
	}
	_ = r.Close()
	r = openLog(t, moved, ReadOnly)
	if c := r.Config(); c.Stream != "" || c.Log != "" {
		t.Fatalf("a read-only open stored the names: %q/%q", c.Stream, c.Log)
	}
	_ = r.Close()

	// A maintainer's open stores them; after another move they stay.
	m, err := Open(moved, Maintainer, WithNames("trades", "trades"))
	if err != nil {
		t.Fatal(err)
	}
	_ = m.Close()
	again := filepath.Join(tmp, "root3", "x", "y")
	if err := os.MkdirAll(filepath.Dir(again), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(moved, again); err != nil {
		t.Fatal(err)
	}
	w := openLog(t, again, Writer, WithNames("x", "y"))
	loc, err := w.PublishedLocation()
	if c := w.Config(); c.Stream != "trades" || c.Log != "trades" || err != nil || loc != filepath.Join(tmp, "pub", "trades", "trades") {
		t.Fatalf("after the stored names, a move gives %q/%q publishing to %s (%v); want trades/trades at pub/trades/trades, whatever the directory or the caller says", c.Stream, c.Log, loc, err)
	}
	// The rest of the stored config, fields of later builds included, is kept.
	var raw string
	if err := w.rdb.QueryRow(`SELECT v FROM meta WHERE k = 'config'`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var m2 map[string]any
	if err := json.Unmarshal([]byte(raw), &m2); err != nil || m2["a_field_of_a_later_build"] != float64(7) || m2["published"] != filepath.Join(tmp, "pub") {
		t.Fatalf("the stored config lost fields: %s (%v)", raw, err)
	}
}

// TestCreateRefusesALogWithoutNames: a log's names are given at create,
// never taken from where its directory sits.
func TestCreateRefusesALogWithoutNames(t *testing.T) {
	for _, cfg := range []Config{{}, {Stream: "trades"}, {Log: "trades"}} {
		dir := filepath.Join(t.TempDir(), "trades", "trades")
		_, err := Create(dir, schema.Any(), cfg)
		if err == nil || !strings.Contains(err.Error(), "name given") {
			t.Fatalf("Create with names %q/%q in %s: %v; want a refusal", cfg.Stream, cfg.Log, dir, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a refused Create left %s (%v)", dir, err)
		}
	}
}

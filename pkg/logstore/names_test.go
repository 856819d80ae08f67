package logstore

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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
	db, err := openDB(filepath.Join(dir, bufferFile), true, 0)
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

// TestALogWithoutStoredNamesTakesThemFromItsDirectoryOnce: a log created
// before logs stored their names is named by its directory; the first
// writable open stores those names, so a later move no longer renames its
// table.
func TestALogWithoutStoredNamesTakesThemFromItsDirectoryOnce(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "root", "trades", "trades")
	l, err := Create(dir, schema.Any(), Config{Published: filepath.Join(tmp, "pub")})
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	stripNames(t, dir)

	// A read-only open derives them and stores nothing.
	r, err := Open(dir, ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Config(); c.Stream != "trades" || c.Log != "trades" {
		t.Fatalf("read-only open names %q/%q, want trades/trades from the directory", c.Stream, c.Log)
	}
	_ = r.Close()
	moved := filepath.Join(tmp, "root2", "quotes", "quotes")
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	r = openLog(t, moved, ReadOnly)
	if c := r.Config(); c.Stream != "quotes" || c.Log != "quotes" {
		t.Fatalf("a read-only open stored the names: %q/%q after the move, want quotes/quotes", c.Stream, c.Log)
	}
	_ = r.Close()

	// A maintainer's open stores them; after another move they stay.
	m, err := Open(moved, Maintainer)
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
	w := openLog(t, again, Writer)
	loc, err := w.PublishedLocation()
	if c := w.Config(); c.Stream != "quotes" || c.Log != "quotes" || err != nil || loc != filepath.Join(tmp, "pub", "quotes", "quotes") {
		t.Fatalf("after the stored names, a move gives %q/%q publishing to %s (%v); want quotes/quotes at pub/quotes/quotes", c.Stream, c.Log, loc, err)
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

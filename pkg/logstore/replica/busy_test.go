package replica

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/litestream"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
)

// TestARoundGivesUpABusyCheckpointAndShipsAnyway: a round that ships a
// large WAL also tries to checkpoint it, which needs the database's write
// lock. While the serving process holds that lock (it commits nearly back
// to back under load), the round must give up on the checkpoint after a
// wait short beside the sync interval and still ship what was committed:
// every row acknowledged meanwhile waits with the round (the replication
// lag's p99; litestream's default waits a whole second).
//
// Nothing here is timed. The wait is read back from the replicator's own
// connection, the give-up from litestream's record of it, and the rows
// from the round's progress, so a slow machine (or -race) changes nothing.
func TestARoundGivesUpABusyCheckpointAndShipsAnyway(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	sch, err := schema.Compile([]byte(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`))
	if err != nil {
		t.Fatal(err)
	}
	w, err := logstore.Create(filepath.Join(root, "s", "log"), sch, logstore.Config{Stream: "s", Log: "log"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Append(ctx, [][]byte{[]byte(`{"n":1}`)}, time.Now().UnixMicro(), nil); err != nil {
		t.Fatal(err)
	}

	// The replicator as runOne sets it up, with litestream's records of
	// every level kept: a skipped checkpoint is a trace record.
	lg, err := logstore.Open(w.Dir(), logstore.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	opts := Options{}.withDefaults()
	db, store := newStore(Target{LogDir: w.Dir(), Client: FileClient(filepath.Join(root, "replica"))}, opts)
	var logged records
	db.Logger = slog.New(&logged)
	if err := store.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer store.Close(ctx)
	before, err := ship(ctx, lg, db, opts)
	if err != nil {
		t.Fatal(err)
	}

	// The wait for the lock is the busy timeout of the connection the
	// round checkpoints through.
	var ms int64
	if err := db.SQLDB().QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&ms); err != nil {
		t.Fatal(err)
	}
	if wait := time.Duration(ms) * time.Millisecond; wait != checkpointBusyTimeout || wait > opts.SyncInterval/10 {
		t.Fatalf("the replicator's connection waits %v for a busy write lock (litestream's default is %v); want %v, at most a tenth of the %v sync interval",
			wait, litestream.DefaultBusyTimeout, checkpointBusyTimeout, opts.SyncInterval)
	}

	// The busy writer: one transaction grows the WAL past litestream's
	// checkpoint threshold (a thousand pages), and the next, begun at
	// once, holds the write lock while the round ships the first.
	busy, err := sql.Open("sqlite", filepath.Join(w.Dir(), logstore.BufferFile)+"?_pragma=busy_timeout(10000)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	conn, err := busy.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{
		"BEGIN IMMEDIATE",
		"CREATE TABLE ballast (b BLOB)",
		"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1500) INSERT INTO ballast SELECT randomblob(4000) FROM n",
		"COMMIT",
		"BEGIN IMMEDIATE",
		"INSERT INTO ballast VALUES (x'00')",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	defer conn.ExecContext(ctx, "ROLLBACK")

	after, err := ship(ctx, lg, db, opts)
	if err != nil {
		t.Fatalf("the round with the write lock held elsewhere failed: %v", err)
	}
	if after.TXID <= before.TXID {
		t.Fatalf("the round with the write lock held elsewhere shipped nothing: txid %d, %d before", after.TXID, before.TXID)
	}
	if !logged.has("passive checkpoint skipped", "reason=database busy") {
		t.Fatalf("the round did not try the checkpoint and give it up as busy; litestream recorded:\n%s", &logged)
	}
}

// records is a slog.Handler that keeps every record at every level, as
// "message key=value …", for a test to look through; litestream may log
// from more than one goroutine.
type records struct {
	mu    sync.Mutex
	lines []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }

func (r *records) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
	return nil
}

// has reports whether a record holds every one of parts.
func (r *records) has(parts ...string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(l, p) }) {
			return true
		}
	}
	return false
}

func (r *records) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

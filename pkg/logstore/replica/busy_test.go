package replica_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the driver the logstore and litestream use

	"github.com/streamcast/streamcast/pkg/logstore/replica"
)

// TestARoundDoesNotWaitOutABusyWriter: a round that ships a large WAL also
// tries to checkpoint it, which needs the database's write lock. While the
// serving process holds that lock (it commits nearly back to back under
// load), the round must give up on the checkpoint quickly and report what
// it shipped, not wait a second for the lock: every row acknowledged
// meanwhile would wait with it (the replication lag's p99).
func TestARoundDoesNotWaitOutABusyWriter(t *testing.T) {
	if raceEnabled {
		// Shipping the 6 MB alone takes over a second under the race
		// detector, so the bound below would say nothing about the lock.
		t.Skip("a wall-clock bound; run without -race")
	}
	ctx := context.Background()
	root := t.TempDir()
	lg := newLog(t, root, "log")
	appendRows(t, lg, 1, 1)
	start(t, []replica.Target{{LogDir: lg.Dir(), Client: replica.FileClient(filepath.Join(root, "replica"))}}).waitReady(t)
	before := waitShipped(t, lg.Dir(), 2)

	// The busy writer: one transaction grows the WAL past litestream's
	// checkpoint threshold (a thousand pages), and the next, begun at once,
	// holds the write lock while the replicator ships the first.
	db, err := sql.Open("sqlite", filepath.Join(lg.Dir(), replica.BufferFile)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
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

	deadline := time.Now().Add(30 * time.Second)
	for {
		p, ok, err := replica.ReadProgress(lg.Dir())
		if err != nil {
			t.Fatal(err)
		}
		if ok && p.TXID > before.TXID {
			if d := p.At.Sub(p.Started); d > 600*time.Millisecond {
				t.Fatalf("the round that shipped the large transaction took %v with the write lock held elsewhere; want it to give up on the checkpoint well within 600ms", d)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the large transaction was not shipped within 30s; last progress %+v", p)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

package control

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestARegistryWithoutReceiptTimesIsUpgradedInPlace: a registry made
// before receipts were pruned has no created column; Open adds it, the
// receipts already there count from the upgrade (none is pruned early),
// and they are pruned a ReceiptRetention later.
func TestARegistryWithoutReceiptTimesIsUpgradedInPlace(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "registry.db")
	if _, err := Init(ctx, path); err != nil {
		t.Fatal(err)
	}
	// Make it as an older build did: no created column, a receipt in it.
	db, err := openDB(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP INDEX receipts_created`,
		`ALTER TABLE receipts DROP COLUMN created`,
		`INSERT INTO receipts (principal, key, hash, status, body, location, etag) VALUES ('', 'k', 'h', 200, x'7b7d', '/control/v1/streams/a', '"1"')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	upgraded := time.Now()
	r, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open a registry without receipt times: %v", err)
	}
	if n, _, err := r.prune(ctx, upgraded.Add(ReceiptRetention-time.Minute)); err != nil || n != 0 {
		t.Errorf("prune before a retention passed since the upgrade: %d receipts, %v; want none", n, err)
	}
	if n, _, err := r.prune(ctx, upgraded.Add(ReceiptRetention+time.Minute)); err != nil || n != 1 {
		t.Errorf("prune a retention after the upgrade: %d receipts, %v; want the 1 there", n, err)
	}
	// A second Open finds the column and changes nothing.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open the upgraded registry again: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}

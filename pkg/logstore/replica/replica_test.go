package replica_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
	"github.com/streamcast/streamcast/pkg/schema"
)

const doc = `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`

// TestShipAndRestore appends rows to a real log while its WAL ships to a
// directory replica, then restores the replica into a new directory and
// reads every acknowledged row back at its offset.
func TestShipAndRestore(t *testing.T) {
	ctx := context.Background()
	sch, err := schema.Compile([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dir := filepath.Join(root, "s", "log")
	lg, err := logstore.Create(dir, sch, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	client := replica.FileClient(filepath.Join(root, "published", "s", "_wal", "log"))
	r, err := replica.Start(ctx, []replica.Target{{LogDir: dir, Client: client}}, replica.Options{SyncInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const groups, per = 50, 20
	for g := range groups {
		rows := make([][]byte, per)
		for i := range rows {
			rows[i] = fmt.Appendf(nil, `{"n":%d}`, g*per+i)
		}
		if _, err := lg.Append(ctx, rows, time.Now().UnixMicro(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}

	restored := filepath.Join(t.TempDir(), "s", "log")
	if err := replica.Restore(ctx, client, restored); err != nil {
		t.Fatal(err)
	}
	back, err := logstore.Open(restored, logstore.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	st, err := back.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.End != groups*per+1 {
		t.Fatalf("restored log ends at %d, want %d", st.End, groups*per+1)
	}
	want := int64(1)
	err = back.Scan(ctx, 1, st.End, nil, func(off, _ int64, row []byte) error {
		if off != want || string(row) != fmt.Sprintf(`{"n":%d}`, off-1) {
			return fmt.Errorf("offset %d holds %s, want offset %d", off, row, want)
		}
		want++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

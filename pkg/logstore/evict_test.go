package logstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
)

// TestEvictKeepsUnpublishedRowsOfAReplicatedLog: a sealed row leaves the
// buffer of a log that does not replicate, but a log that replicates keeps
// it until the published table holds it, since its replica (a copy of
// buffer.db) is the only off-box copy of an unpublished row.
func TestEvictKeepsUnpublishedRowsOfAReplicatedLog(t *testing.T) {
	for _, replicated := range []bool{false, true} {
		t.Run(fmt.Sprint("replicated=", replicated), func(t *testing.T) {
			ctx := context.Background()
			root := t.TempDir()
			dir := filepath.Join(root, "s", "s")
			lg, err := logstore.Create(dir, schema.Any(), logstore.Config{Stream: "s", Log: "s", Published: filepath.Join(root, "pub")})
			if err != nil {
				t.Fatal(err)
			}
			defer lg.Close()
			if replicated {
				if err := os.WriteFile(filepath.Join(dir, logstore.ReplicaProgressFile), []byte(`{}`), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 10 {
				if _, err := lg.Append(ctx, [][]byte{fmt.Appendf(nil, `{"i":%d}`, i)}, 1, nil); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := lg.Seal(ctx, true); err != nil {
				t.Fatal(err)
			}
			n, err := lg.Evict(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int64{false: 10, true: 0}[replicated]; n != want {
				t.Fatalf("evicted %d sealed but unpublished rows, want %d", n, want)
			}
			if _, err := lg.Publish(ctx, true); err != nil {
				t.Fatal(err)
			}
			n2, err := lg.Evict(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n+n2 != 10 {
				t.Fatalf("evicted %d rows once published, want all 10 gone", n+n2)
			}
		})
	}
}

package logstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
)

// TestCleanCacheTrimsByRetentionAloneAndRaisesTheFloor: a cache log (a
// relay's) is never published, so CleanCache drops its oldest files by
// the tiers' bounds alone, raising the floor over them in the same step:
// the log then serves from the first row it still holds, and the rows no
// file holds yet stay buffered. Within its bounds it drops nothing.
func TestCleanCacheTrimsByRetentionAloneAndRaisesTheFloor(t *testing.T) {
	for _, bound := range []int64{1 << 40, 1} {
		t.Run(fmt.Sprint("staging_max_bytes=", bound), func(t *testing.T) {
			ctx := context.Background()
			root := t.TempDir()
			pub := filepath.Join(root, "pub")
			lg, err := logstore.Create(filepath.Join(root, "s", "s"), schema.Any(),
				logstore.Config{Stream: "s", Log: "s", Published: pub, StagingRetention: time.Hour, StagingMaxBytes: bound})
			if err != nil {
				t.Fatal(err)
			}
			defer lg.Close()
			for f := range 3 { // three files of 10 rows, offsets 1..30
				for i := range 10 {
					if _, err := lg.Append(ctx, [][]byte{fmt.Appendf(nil, `{"i":%d}`, f*10+i)}, 1, nil); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := lg.Seal(ctx, true); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := lg.Append(ctx, [][]byte{[]byte(`{"i":30}`), []byte(`{"i":31}`)}, 1, nil); err != nil {
				t.Fatal(err)
			}
			done, err := lg.CleanCache(ctx)
			if err != nil {
				t.Fatal(err)
			}
			earliest, end, err := lg.Extent(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wantFiles, wantEarliest, wantFloor := 0, int64(1), int64(0)
			if bound == 1 {
				wantFiles, wantEarliest, wantFloor = 3, 31, 31
			}
			if done.LocalFiles != wantFiles || done.BufferRows != 30 || earliest != wantEarliest || end != 33 {
				t.Fatalf("cleaned %+v, extent [%d,%d); want %d files out, the 30 sealed rows evicted, extent [%d,33)",
					done, earliest, end, wantFiles, wantEarliest)
			}
			if floor, err := lg.Floor(ctx); err != nil || floor != wantFloor {
				t.Fatalf("floor %d (%v); want %d", floor, err, wantFloor)
			}
			if _, err := os.Stat(pub); !os.IsNotExist(err) {
				t.Fatalf("a cache clean wrote under the published prefix %s (%v)", pub, err)
			}
		})
	}
}

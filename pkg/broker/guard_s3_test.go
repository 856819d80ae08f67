//go:build linux

package broker

import (
	"context"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
)

// TestHistoryGuardChecksAHistoryOnlyThePublishedTableHolds: once every
// row has left the buffer and the local files, the dense check counts the
// published table's records and the known row is read from it, on
// file:// and on s3:// (versitygw).
func TestHistoryGuardChecksAHistoryOnlyThePublishedTableHolds(t *testing.T) {
	s3srv := startS3(t)
	s3srv.UseCredentials(t)
	for _, kind := range []string{"file", "s3"} {
		t.Run(kind, func(t *testing.T) {
			cfg, _ := identityConfig(t, kind, s3srv)
			cfg.Streams[0].ExactlyOnce = true
			cfg.Streams[0].MaxReplay = nil
			cfg.Tiers.StagingMaxBytes = 1 // clean takes every published local file out
			id, rows := history(t, cfg, 6)

			// Offline, as after a week of maintenance: everything
			// published, the buffer evicted, the local files gone.
			lay, err := meta.NewLayout(cfg.Root, cfg.Published)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			later := time.Now().Add(30 * 24 * time.Hour)
			lg, err := logstore.Open(lay.LogDir("trades", "trades"), logstore.Writer, logstore.WithClock(func() time.Time { return later }))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lg.PublishAll(ctx); err != nil {
				t.Fatal(err)
			}
			for range 2 { // take the files out, then delete them after their grace
				if _, err := lg.Clean(ctx); err != nil {
					t.Fatal(err)
				}
				later = later.Add(30 * 24 * time.Hour)
			}
			st, err := lg.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := lg.Close(); err != nil {
				t.Fatal(err)
			}
			if st.BufferedRows != 0 || st.LocalFiles != 0 || st.PublishedThrough != 6 {
				t.Fatalf("the rows are not only in the published table: %+v", st)
			}

			guard(&cfg, id, 4, rows[3])
			srv := startServer(t, cfg)
			_ = srv.Close()

			guard(&cfg, id, 4, rows[4])
			wantGuardRefusal(t, cfg, meta.CheckKnownRow, "offset 4 holds "+string(rows[3]))
		})
	}
}

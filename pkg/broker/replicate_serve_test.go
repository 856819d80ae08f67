//go:build linux

package broker

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// TestReplicatorKilledUnderLoadLosesNothing: the replicate child is
// SIGKILLed while rows arrive; serve restarts it, and the replica ends up
// holding every acknowledged row, byte for byte.
func TestReplicatorKilledUnderLoadLosesNothing(t *testing.T) {
	exe := streamcastExe(t)
	cfg := testConfig(t)
	cfg.Streams = cfg.Streams[:1] // trades
	cfg.Streams[0].Replicate = true
	cfg.Published = filepath.Join(t.TempDir(), "pub")
	cfg.Replicate.Destination = filepath.Join(t.TempDir(), "replica")
	cfg.Maintain = maintainOf(nil, time.Second) // no maintenance role: the buffer keeps every row
	cfg.Replicate.SyncInterval = 20 * time.Millisecond
	srv := startServer(t, cfg, Options{Executable: exe})

	kids := srv.Stats().Children
	if len(kids) != 1 || kids[0].Role != "replicate" || kids[0].PID == nil {
		t.Fatalf("children %+v, want the replicate child alone", kids)
	}
	p := dialPublisher(t, srv, "trades")
	var last int64
	publish := func(from, frames int) {
		for i := range frames {
			r := p.roundTrip(batch(from+i*10, 10))
			if r.Error != "" {
				t.Fatalf("publish: %+v", r)
			}
			last = r.OK[len(r.OK)-1]
		}
	}
	publish(0, 50)
	old := *kids[0].PID
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	publish(500, 50) // while it is down and restarting
	waitFor(t, "the replicate child to be restarted and ready", 30*time.Second, func() bool {
		c := srv.Stats().Children[0]
		return c.Restarts >= 1 && c.PID != nil && *c.PID != old && c.Ready
	})
	publish(1000, 50)
	waitFor(t, "every acknowledged row to be shipped", 30*time.Second, func() bool {
		s := streamStats(srv, "trades")
		return s.ReplicatedThrough != nil && *s.ReplicatedThrough == last
	})

	// Read the replica back and compare it with the log, row by row.
	ctx := context.Background()
	lg := srv.reg.Get("trades").log
	target, err := replica.TargetFor(lg.Dir(), replica.Destination{Location: warehouse.Location{Dir: cfg.Replicate.Destination}})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "trades", "trades")
	if err := replica.Restore(ctx, target.Client, dir); err != nil {
		t.Fatal(err)
	}
	back, err := logstore.Open(dir, logstore.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	var want [][]byte
	if err := lg.Scan(ctx, 1, last+1, nil, func(_, _ int64, row []byte) error {
		want = append(want, append([]byte(nil), row...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	n := int64(0)
	if err := back.Scan(ctx, 1, last+1, nil, func(off, _ int64, row []byte) error {
		if string(row) != string(want[off-1]) {
			t.Fatalf("offset %d: the replica holds %s, the log %s", off, row, want[off-1])
		}
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != last {
		t.Fatalf("the replica holds %d rows, want every acknowledged one: %d", n, last)
	}
}

package logstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// walFrames returns how many frames the log's WAL holds, from its size: a
// 32-byte header, then frames of a 24-byte header and one page each.
func walFrames(t testing.TB, l *Log) int64 {
	t.Helper()
	var pageSize int64
	if err := l.rdb.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(l.dir, BufferFile+"-wal"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() < 32 {
		return 0
	}
	return (fi.Size() - 32) / (24 + pageSize)
}

// walPagesPerGroup appends groups single-row groups (with a mark each when
// marks) and returns the WAL frames they wrote, per group. The handle
// checkpoints only past ReplicatedCheckpointPages, so the WAL only grows.
func walPagesPerGroup(t testing.TB, groups int, marks bool) float64 {
	t.Helper()
	l := createLog(t, mustCompile(t, tradeSchema), Config{}, WithReplicatedWAL())
	rows := tradeRows(t, 1)
	ctx := context.Background()
	// One append first, so the frames of the WAL's start are not counted.
	if _, err := l.Append(ctx, rows, 1, nil); err != nil {
		t.Fatal(err)
	}
	before := walFrames(t, l)
	for i := range groups {
		var m []Mark
		if marks {
			m = []Mark{{Publisher: "p", LastSeq: int64(i + 1), LastOffset: int64(i + 2)}}
		}
		if _, err := l.Append(ctx, rows, 1, m); err != nil {
			t.Fatal(err)
		}
	}
	return float64(walFrames(t, l)-before) / float64(groups)
}

// TestASingleRowCommitWritesOnePagePerTableItChanges: a commit group's
// cost in the WAL does not grow with anything but the group: one page for
// the group's row (a small group fits in the groups table's last leaf),
// one for the marks it upserts, one for the mark history a publish pass
// reads (marksAsOf), and no page of meta (the end is derived, endSQL).
// Writing meta's next_offset on each commit would cost one page more.
// Averaged over many groups, so the occasional new leaf page is allowed for.
func TestASingleRowCommitWritesOnePagePerTableItChanges(t *testing.T) {
	for _, c := range []struct {
		marks bool
		max   float64
	}{{false, 1.2}, {true, 3.2}} {
		got := walPagesPerGroup(t, 300, c.marks)
		t.Logf("marks %v: %.2f WAL pages per single-row group", c.marks, got)
		if got > c.max {
			t.Errorf("a single-row group (marks %v) writes %.2f WAL pages; want at most %.1f", c.marks, got, c.max)
		}
	}
}

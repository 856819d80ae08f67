package logstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCleanNeverDeletesTheOnlyCopyOfARow(t *testing.T) {
	ctx := context.Background()
	cfg := tierConfig()
	cfg.TargetFileBytes = 1 // every file is finished
	cfg.StagingMaxBytes = 1 // and the local tier always over its bound
	l := createLog(t, mustCompile(t, tradeSchema), cfg)
	exp := expectation{}
	appendTrades(t, l, exp, 20, 25)
	if _, err := l.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	through, _ := l.PublishedThrough(ctx)
	appendTrades(t, l, exp, 20, 25)
	if _, err := l.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	before := localRanges(t, l)
	c, err := l.Clean(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := localRanges(t, l)
	if c.LocalFiles == 0 || len(after) == 0 {
		t.Fatalf("Clean took %d of %d files out, left %d", c.LocalFiles, len(before), len(after))
	}
	if after[0].start != through+1 {
		t.Fatalf("the local files now start at %d; the table holds through %d", after[0].start, through)
	}
	_, end, _ := l.Extent(ctx)
	for range 2 {
		if _, err := l.Clean(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := exp.check(scanAll(t, l, 1, end), 1, end); err != nil {
		t.Fatal(err)
	}
	checkFilesDir(t, l)
}

func TestCleanKeepsPublishedFilesForTheirRetentionUnlessSpaceRunsOut(t *testing.T) {
	ctx := context.Background()
	cfg := tierConfig()
	cfg.TargetFileBytes = 1
	cfg.StagingRetention = time.Hour
	l := createLog(t, mustCompile(t, tradeSchema), cfg)
	exp := expectation{}
	appendTrades(t, l, exp, 40, 25)
	if _, err := l.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	files := localRanges(t, l)
	if c, err := l.Clean(ctx); err != nil || c.LocalFiles != 0 {
		t.Fatalf("Clean within the retention: %+v, %v", c, err)
	}
	var total int64
	for _, f := range files {
		total += f.fileBytes
	}
	// Room for about half: the oldest half goes.
	l.setOverride(Config{StagingMaxBytes: total / 2})
	c, err := l.Clean(ctx)
	if err != nil {
		t.Fatal(err)
	}
	left := localRanges(t, l)
	var kept int64
	for _, f := range left {
		kept += f.fileBytes
	}
	if c.LocalFiles == 0 || kept > total/2 || left[len(left)-1].end != files[len(files)-1].end {
		t.Fatalf("with room for %d of %d bytes Clean took %d files, kept %d bytes in %v", total/2, total, c.LocalFiles, kept, left)
	}
	_, end, _ := l.Extent(ctx)
	if err := exp.check(scanAll(t, l, 1, end), 1, end); err != nil {
		t.Fatal(err)
	}
}

func TestDeletionsWaitForTheirGrace(t *testing.T) {
	ctx := context.Background()
	cfg := tierConfig()
	cfg.TargetFileBytes = 1
	cfg.LocalDeleteGrace = time.Hour
	clock := newFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := createLog(t, mustCompile(t, tradeSchema), cfg, WithClock(clock.Now))
	exp := expectation{}
	appendTrades(t, l, exp, 20, 25)
	if _, err := l.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	names := localNames(t, l)
	clock.Advance(time.Millisecond) // past tierConfig's staging retention
	c, err := l.Clean(ctx)
	if err != nil || c.LocalFiles != len(names) || c.Deleted != 0 {
		t.Fatalf("Clean = %+v, %v; %d files", c, err, len(names))
	}
	// Out of the records, still on disk until the grace is over: a scan
	// that listed them before the clean reads them still.
	clock.Advance(cfg.LocalDeleteGrace - time.Microsecond)
	if c, err := l.Clean(ctx); err != nil || c.Deleted != 0 {
		t.Fatalf("Clean a microsecond before the grace is over = %+v, %v", c, err)
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(l.Dir(), FilesDir, n)); err != nil {
			t.Fatalf("%s was deleted before its grace: %v", n, err)
		}
	}
	clock.Advance(time.Microsecond)
	if c, err := l.Clean(ctx); err != nil || c.Deleted != len(names) {
		t.Fatalf("Clean once the grace is over = %+v, %v", c, err)
	}
	if left := localNames(t, l); len(left) != 0 {
		t.Fatalf("files/ still holds %v", left)
	}
}

// TestCleanTakesPublishedFilesOutOnceTheirRetentionPasses: a published
// local file stays for staging_retention after it was sealed, then goes.
func TestCleanTakesPublishedFilesOutOnceTheirRetentionPasses(t *testing.T) {
	ctx := context.Background()
	cfg := tierConfig()
	cfg.TargetFileBytes = 1
	cfg.StagingRetention = time.Hour
	clock := newFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := createLog(t, mustCompile(t, tradeSchema), cfg, WithClock(clock.Now))
	exp := expectation{}
	appendTrades(t, l, exp, 20, 25)
	if _, err := l.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	files := localRanges(t, l)
	clock.Advance(cfg.StagingRetention - time.Second)
	if c, err := l.Clean(ctx); err != nil || c.LocalFiles != 0 {
		t.Fatalf("Clean a second before the retention is over: %+v, %v", c, err)
	}
	clock.Advance(time.Second + time.Microsecond)
	if c, err := l.Clean(ctx); err != nil || c.LocalFiles != len(files) {
		t.Fatalf("Clean once the retention is over: %+v, %v; want all %d files out", c, err, len(files))
	}
	_, end, _ := l.Extent(ctx)
	if err := exp.check(scanAll(t, l, 1, end), 1, end); err != nil {
		t.Fatal(err)
	}
}

// TestAScanReadsAFileCleanedUnderIt removes every local file (published)
// and lets the grace pass while a scan is between files: the scan reads
// the rest from the published table, once each.
func TestAScanReadsAFileCleanedUnderIt(t *testing.T) {
	ctx := context.Background()
	cfg := tierConfig()
	cfg.TargetFileBytes = 1
	l := createLog(t, mustCompile(t, tradeSchema), cfg)
	m := openLog(t, l.Dir(), Maintainer)
	exp := expectation{}
	appendTrades(t, l, exp, 20, 25)
	if _, err := l.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Evict(ctx); err != nil {
		t.Fatal(err)
	}
	var got []scanned
	err := l.Scan(ctx, 1, 501, nil, func(off, ts int64, row []byte) error {
		got = append(got, scanned{off, ts, string(row)})
		if off == 3 {
			for range 2 { // take out, then delete (no grace)
				if _, err := m.Clean(ctx); err != nil {
					return err
				}
			}
			if n := len(localNames(t, l)); n != 0 {
				t.Errorf("%d local files left", n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.check(got, 1, 501); err != nil {
		t.Fatal(err)
	}
}

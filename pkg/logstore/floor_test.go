package logstore

import (
	"context"
	"testing"
	"time"
)

// appendAged appends groups of trade rows, one a minute on clk, recording
// them in exp; group g is stamped clk's start + g minutes.
func appendAged(t testing.TB, l *Log, clk *fakeClock, exp expectation, groups, perGroup int) {
	t.Helper()
	for g := range groups {
		raw := make([][]byte, perGroup)
		for i := range raw {
			raw[i] = tradeRow(len(exp) + g*perGroup + i)
		}
		rows := canonical(t, l.Schema(), raw)
		ts := clk.Now().UnixMicro()
		first, err := l.Append(context.Background(), rows, ts, nil)
		if err != nil {
			t.Fatal(err)
		}
		exp.add(first, ts, rows)
		clk.Advance(time.Minute)
	}
}

func TestTheFloorKeepsEveryNewerRowAndHidesTheRest(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := newFakeClock(t0)
	l := createLog(t, mustCompile(t, tradeSchema), tierConfig(), WithClock(clk.Now))
	exp := expectation{}
	appendAged(t, l, clk, exp, 40, 10) // [1,401), group g at t0+g min
	if _, err := l.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Evict(ctx); err != nil { // [1,401) only in files now
		t.Fatal(err)
	}
	appendAged(t, l, clk, exp, 20, 10) // [401,601), buffered
	for _, c := range []struct {
		cutoff     time.Time
		lo, hi     int64 // the floor must lie in [lo, hi]: at most the first newer row, and not below its file
		firstNewer int64
	}{
		{t0.Add(-time.Hour), 1, 1, 1},
		{t0.Add(25*time.Minute + 30*time.Second), 200, 261, 261},
		{t0.Add(50*time.Minute + 30*time.Second), 511, 511, 511}, // buffered: exact
		{t0.Add(24 * time.Hour), 601, 601, 601},                  // nothing newer: the end
	} {
		floor, err := l.FloorFor(ctx, c.cutoff.UnixMicro())
		if err != nil {
			t.Fatal(err)
		}
		if floor < c.lo || floor > c.hi {
			t.Fatalf("FloorFor(%s) = %d, want in [%d,%d]", c.cutoff.Sub(t0), floor, c.lo, c.hi)
		}
		for off := int64(1); off < floor; off++ {
			if exp[off].ts > c.cutoff.UnixMicro() {
				t.Fatalf("FloorFor(%s) = %d hides offset %d, which is newer than the cutoff", c.cutoff.Sub(t0), floor, off)
			}
		}
	}
	floor, _ := l.FloorFor(ctx, t0.Add(25*time.Minute+30*time.Second).UnixMicro())
	if err := l.SetFloor(ctx, floor); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log) {
		t.Helper()
		if e, end, err := l.Extent(ctx); err != nil || e != floor || end != 601 {
			t.Fatalf("Extent = [%d,%d) %v; want [%d,601)", e, end, err, floor)
		}
		if _, err := scanRange(l, floor-1, 601); !isRange(err) {
			t.Fatalf("a scan from below the floor = %v; want a range error", err)
		}
		if err := exp.check(scanAll(t, l, floor, 601), floor, 601); err != nil {
			t.Fatal(err)
		}
		if n, err := l.CountRows(ctx, 0, 601); err != nil || n != 601-floor {
			t.Fatalf("CountRows(0, 601) = %d, %v; want %d", n, err, 601-floor)
		}
	}
	check(l)
	if err := l.SetFloor(ctx, floor-10); err != nil {
		t.Fatal(err)
	}
	if err := l.SetFloor(ctx, 602); err == nil {
		t.Fatal("SetFloor past the end was accepted")
	}
	dir := l.Dir()
	l.Close()
	check(openLog(t, dir, ReadOnly))
	if st, err := openLog(t, dir, ReadOnly).Status(ctx); err != nil || st.Floor != floor {
		t.Fatalf("Status.Floor = %d, %v; want %d", st.Floor, err, floor)
	}
}

func TestDeleteBelowTakesOutWholeFilesBelowTheFloorInEveryTier(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { testDeleteBelow(t, b) })
	}
}

func testDeleteBelow(t *testing.T, b backend) {
	ctx := context.Background()
	// The table's snapshots carry wall-clock stamps, which snapshot expiry
	// compares with the handle's clock: start it at the wall clock.
	clk := newFakeClock(time.Now())
	cfg := tierConfig()
	cfg.StagingRetention = 24 * time.Hour // local files stay: DeleteBelow takes them
	l := b.make(t, cfg, WithClock(clk.Now))
	exp := expectation{}
	appendAged(t, l, clk, exp, 40, 10) // [1,401)
	if _, err := l.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	appendAged(t, l, clk, exp, 20, 10) // [401,601)
	if _, err := l.Seal(ctx, false); err != nil {
		t.Fatal(err)
	}
	pt, err := l.published()
	if err != nil {
		t.Fatal(err)
	}
	pubsBefore := recordedFiles(t, l, "published")

	if _, err := l.DeleteBelow(ctx, 300); err == nil {
		t.Fatal("DeleteBelow above the floor set was accepted")
	}
	// A floor inside a local (and published) file, which must stay.
	var straddling fileRange
	for _, f := range localRanges(t, l) {
		if f.start > 250 && f.end-f.start > 2 {
			straddling = f
			break
		}
	}
	floor := straddling.start + 1
	if err := l.SetFloor(ctx, floor); err != nil {
		t.Fatal(err)
	}
	restore := crashAt(l, "delete-below:committed")
	d1, err := l.DeleteBelow(ctx, floor)
	if err == nil {
		t.Fatal("the simulated crash did not stop DeleteBelow")
	}
	restore()
	d, err := l.DeleteBelow(ctx, floor) // the rerun finds the commit landed
	if err != nil {
		t.Fatal(err)
	}
	if d.PublishedFiles == 0 || d1.LocalFiles == 0 {
		t.Fatalf("DeleteBelow took out %+v; want published and local files (the first call took %+v)", d, d1)
	}
	if _, err := l.Evict(ctx); err != nil {
		t.Fatal(err)
	}
	// Nothing wholly below the floor is left in any record, nothing at or
	// above it went, and a file straddling it stayed.
	locals := localRanges(t, l)
	for _, f := range locals {
		if f.end <= floor {
			t.Errorf("local file [%d,%d) is wholly below the floor", f.start, f.end)
		}
	}
	if len(locals) == 0 || locals[0].name != straddling.name {
		t.Fatalf("the local file [%d,%d) straddling the floor %d went", straddling.start, straddling.end, floor)
	}
	pubs := recordedFiles(t, l, "published")
	for _, p := range pubs[:len(pubs)-1] {
		if p.end <= floor {
			t.Errorf("published file [%d,%d) is wholly below the floor", p.start, p.end)
		}
	}
	offs, _ := tableOffsets(t, l)
	if len(offs) == 0 || offs[0] > floor || offs[0] != pubs[0].start || offs[len(offs)-1] != 400 {
		t.Fatalf("the table now holds [%d..%d]; want from the first kept file %d (at most the floor %d) to 400", offs[0], offs[len(offs)-1], pubs[0].start, floor)
	}
	if err := exp.check(scanAll(t, l, floor, 601), floor, 601); err != nil {
		t.Fatal(err)
	}
	// The tiers go on: more rows seal and publish above what is left.
	appendAged(t, l, clk, exp, 5, 10)
	if end, err := l.PublishAll(ctx); err != nil || end != 651 {
		t.Fatalf("PublishAll after DeleteBelow = %d, %v", end, err)
	}
	if err := exp.check(scanAll(t, l, floor, 651), floor, 651); err != nil {
		t.Fatal(err)
	}
	// After the grace, clean and clean-published delete the objects.
	clk.Advance(3 * time.Hour)
	for range 2 {
		if _, err := l.Clean(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := l.CleanPublished(ctx); err != nil {
			t.Fatal(err)
		}
	}
	objsAfter := tableObjects(t, l, pt)
	for _, p := range pubsBefore {
		if p.start >= pubs[0].start { // kept
			continue
		}
		for _, o := range objsAfter {
			if pt.Norm(o) == pt.Norm(p.path) {
				t.Errorf("published file [%d,%d) below the floor is still in the bucket after the grace", p.start, p.end)
			}
		}
	}
	if st, _ := l.Status(ctx); st.PendingDeletes != 0 {
		t.Fatalf("%d deletions still pending after the grace", st.PendingDeletes)
	}
	checkFilesDir(t, l)
}

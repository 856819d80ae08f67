package logstore

import (
	"context"
	"testing"
)

// TestScanCountingCountsEachRowByTheTierItCameFrom: a log holding rows in
// all three tiers (published [101,401), a local file [401,701), buffered
// [701,801)) is scanned whole and in part; the counts by tier are exactly
// the rows handed to fn from each.
func TestScanCountingCountsEachRowByTheTierItCameFrom(t *testing.T) {
	ctx := context.Background()
	cfg := tierConfig()
	cfg.Start = 101
	cfg.TargetFileBytes = 1
	cfg.StagingMaxBytes = 1
	l := createLog(t, mustCompile(t, tradeSchema), cfg)
	exp := expectation{}
	appendTrades(t, l, exp, 30, 10) // [101,401)
	if _, err := l.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	appendTrades(t, l, exp, 30, 10) // [401,701)
	if _, err := l.Seal(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	appendTrades(t, l, exp, 10, 10) // [701,801), buffered
	st, _ := l.Status(ctx)
	if st.PublishedThrough != 400 || st.LocalFiles == 0 || st.BufferedRows != 100 {
		t.Fatalf("the log does not hold the tiers this test expects: %+v", st)
	}
	for _, c := range []struct {
		from, to int64
		want     TierRows
	}{
		{101, 801, TierRows{TierBuffer: 100, TierLocal: 300, TierPublished: 300}},
		{350, 750, TierRows{TierBuffer: 49, TierLocal: 300, TierPublished: 51}},
		{720, 801, TierRows{TierBuffer: 81}},
	} {
		var got TierRows
		n := int64(0)
		err := l.ScanCounting(ctx, c.from, c.to, nil, &got, func(int64, int64, []byte) error { n++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("scan [%d,%d): rows by tier %v, want %v", c.from, c.to, got, c.want)
		}
		if sum := got[TierBuffer] + got[TierLocal] + got[TierPublished]; sum != n {
			t.Errorf("scan [%d,%d): the tiers count %d rows, fn got %d", c.from, c.to, sum, n)
		}
	}
}

package logstore

import (
	"context"
	"strconv"
	"testing"
	"time"
)

func TestSummaryRollsUpTheStampsAndTheColumnBoundsOfEveryTier(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := newFakeClock(t0)
	l := createLog(t, mustCompile(t, tradeSchema), tierConfig(), WithClock(clk.Now))
	exp := expectation{}
	appendAged(t, l, clk, exp, 3, 10) // [1,31) at t0, t0+1m, t0+2m
	if _, err := l.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	appendAged(t, l, clk, exp, 2, 10) // [31,51) at t0+3m, t0+4m: buffered only

	s, err := l.Summary(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !s.HasTS || s.FirstTS != t0.UnixMicro() || s.LastTS != t0.Add(4*time.Minute).UnixMicro() {
		t.Fatalf("summary %+v; want stamps from t0 to t0+4m, the buffer's included", s)
	}
	if s.Stats != nil {
		t.Fatalf("stats %v with rows only in the buffer; want none (the buffer keeps no statistics)", s.Stats)
	}

	if _, err := l.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if s, err = l.Summary(ctx, 0); err != nil {
		t.Fatal(err)
	}
	ev, ok := s.Stats["event_ts"]
	// appendAged numbers the rows of group g len(exp)+g*perGroup+i: the
	// greatest is row 59 (event_ts grows with the number).
	wantMax := strconv.FormatInt(1735689600000000+59*1375, 10)
	if !ok || string(ev[0]) != "1735689600000000" || string(ev[1]) != wantMax {
		t.Fatalf("event_ts bounds %s; want [1735689600000000, %s] over every file", ev, wantMax)
	}
	if sym := s.Stats["symbol"]; string(sym[0]) != `"BTC-USD"` || string(sym[1]) != `"XRP-USD"` {
		t.Fatalf("symbol bounds %s; want [BTC-USD, XRP-USD]", sym)
	}
	if s.LastTS != t0.Add(4*time.Minute).UnixMicro() {
		t.Fatalf("last stamp %d after the seal; want t0+4m", s.LastTS)
	}
}

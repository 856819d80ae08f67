package logstore

import (
	"context"
	"database/sql"
	"maps"
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

// nullSchema has nullable columns of several kinds, one of them never set.
const nullSchema = `{"type":"object","properties":{
	"n":{"type":"integer"},
	"s":{"type":["string","null"]},
	"x":{"type":["number","null"]},
	"st":{"type":["object","null"],"properties":{"a":{"type":"integer"}},"required":["a"]},
	"never":{"type":["integer","null"]}},
	"required":["n"]}`

// nullRow is row i of nullSchema: s is null when i%3 == 0, x when
// i%5 == 0, st when i is even, never always.
func nullRow(i int) []byte {
	b := []byte(`{"n":` + strconv.Itoa(i))
	if i%3 != 0 {
		b = append(b, `,"s":"v`+strconv.Itoa(i)+`"`...)
	}
	if i%5 != 0 {
		b = append(b, `,"x":`+strconv.Itoa(i)+`.5`...)
	}
	if i%2 != 0 {
		b = append(b, `,"st":{"a":`+strconv.Itoa(i)+`}`...)
	}
	return append(b, '}')
}

// wantNulls counts nullRow's nulls for rows [0, n).
func wantNulls(n int) map[string]int64 {
	w := map[string]int64{"n": 0, "s": 0, "x": 0, "st": 0, "never": int64(n)}
	for i := range n {
		if i%3 == 0 {
			w["s"]++
		}
		if i%5 == 0 {
			w["x"]++
		}
		if i%2 == 0 {
			w["st"]++
		}
	}
	return w
}

func TestSummaryCountsNullsExactlyThroughSealCompactionAndPublish(t *testing.T) {
	ctx := context.Background()
	sch := mustCompile(t, nullSchema)
	cfg := tierConfig()
	cfg.StagingMaxBytes = 1 // clean evicts whatever is published
	l := createLog(t, sch, cfg)
	const files, perFile = 5, 37
	k := 0
	for range files {
		raw := make([][]byte, perFile)
		for i := range raw {
			raw[i] = nullRow(k)
			k++
		}
		if _, err := l.Append(ctx, canonical(t, sch, raw), 1000, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Seal(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	want := wantNulls(k)
	check := func(stage string, local, published int64) {
		t.Helper()
		st, err := l.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.LocalFiles != local || st.PublishedFiles != published {
			t.Fatalf("%s: %d local files, %d published; the test wants %d and %d", stage, st.LocalFiles, st.PublishedFiles, local, published)
		}
		s, err := l.Summary(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(s.Nulls, want) {
			t.Fatalf("%s: null counts %v; want %v", stage, s.Nulls, want)
		}
		if n := s.Stats["n"]; string(n[0]) != "0" || string(n[1]) != strconv.Itoa(k-1) {
			t.Fatalf("%s: n bounds %s; want [0, %d]", stage, n, k-1)
		}
		if _, ok := s.Stats["never"]; ok {
			t.Fatalf("%s: an all-null column has bounds %s", stage, s.Stats["never"])
		}
	}
	check("sealed", files, 0)
	if _, err := l.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	check("published, still local", files, files)
	if _, err := l.Compact(ctx, true); err != nil {
		t.Fatal(err)
	}
	check("compacted over the published files", 1, files)
	if _, err := l.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	check("the compacted file published", 1, 1)
	if _, err := l.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	check("published only", 0, 1)
}

func TestSummaryLeavesTheNullCountsOfOldRecordsUnknown(t *testing.T) {
	ctx := context.Background()
	sch := mustCompile(t, nullSchema)
	l := createLog(t, sch, tierConfig())
	for g := range 2 {
		raw := make([][]byte, 20)
		for i := range raw {
			raw[i] = nullRow(g*20 + i)
		}
		if _, err := l.Append(ctx, canonical(t, sch, raw), 1000, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Seal(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	// The first file as a buffer.db written before null counts records it:
	// [min, max] for the columns that have bounds, nothing for the rest.
	old := `{"n":[0,19],"s":["v1","v8"],"x":[1.5,19.5]}`
	err := l.writeTx(ctx, func(c *sql.Conn) error {
		_, err := c.ExecContext(ctx, `UPDATE files SET stats = ? WHERE start_offset = 1`, old)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Summary(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Nulls) != 0 {
		t.Fatalf("null counts %v with an old record among the files; want none known", s.Nulls)
	}
	if n := s.Stats["n"]; string(n[0]) != "0" || string(n[1]) != "39" {
		t.Fatalf("n bounds %s; want [0, 39], the old record's included", n)
	}
	// Pruning reads the old record too.
	files, err := l.filesIn(ctx, 1, 41)
	if err != nil || len(files) != 2 {
		t.Fatalf("files %+v (%v)", files, err)
	}
	for _, tc := range []struct {
		where string
		first bool // whether the old file may match
	}{
		{`{"n":25}`, false},
		{`{"n":5}`, true},
		{`{"s":"v9"}`, false},
		{`{"s":null}`, true},
	} {
		f, err := sch.CompileFilter([]byte(tc.where))
		if err != nil {
			t.Fatal(err)
		}
		if got := files[0].mayMatch(f); got != tc.first {
			t.Errorf("where %s: the old record may match = %t; want %t", tc.where, got, tc.first)
		}
	}
}

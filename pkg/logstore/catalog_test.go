package logstore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/schema"
)

// The queries read the records of a real buffer.db, made through
// logstore's API and its maintenance steps as serve and its maintenance roles make
// them: nothing here writes a record by hand, so a test fails when a query
// misreads what the log really records.

const doc = `{"type":"object","properties":{"n":{"type":"integer"},"note":{"type":["string","null"]}},"required":["n","note"]}`

// t0 is the stamp (µs) of the first group; group g is stamped t0 + g s.
const t0 = int64(1_790_000_000_000_000)

func tsAt(g int) int64 { return t0 + int64(g)*1_000_000 }

// tiered is a log of 13 groups of 10 rows, {"n": offset, "note": null on
// every fifth offset}, group g stamped tsAt(g): groups 0-9 (offsets
// 1-100) sealed one file each, published and evicted from the buffer,
// groups 10-12 (offsets 101-130) only buffered.
func tiered(t *testing.T) *Log {
	t.Helper()
	ctx := context.Background()
	lg := create(t, Config{TargetSealBytes: 1})
	appendGroups(t, lg, 0, 10)
	if _, err := lg.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Evict(ctx); err != nil {
		t.Fatal(err)
	}
	appendGroups(t, lg, 10, 3)
	return lg
}

func create(t *testing.T, cfg Config) *Log {
	t.Helper()
	sch, err := schema.Compile([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	cfg.Published = filepath.Join(root, "published")
	cfg.Stream, cfg.Log = "s", "log"
	lg, err := Create(filepath.Join(root, "s", "log"), sch, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lg.Close() })
	return lg
}

// appendGroups commits groups first..first+n-1, 10 rows each.
func appendGroups(t *testing.T, lg *Log, first, n int) {
	t.Helper()
	for g := first; g < first+n; g++ {
		rows := make([][]byte, 10)
		for i := range rows {
			off := g*10 + i + 1
			note := `"x"`
			if off%5 == 0 {
				note = "null"
			}
			rows[i] = fmt.Appendf(nil, `{"n":%d,"note":%s}`, off, note)
		}
		if _, err := lg.Append(context.Background(), rows, tsAt(g), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// holed is a log whose restore skipped [11, 20): offsets 1-10 buffered,
// the hole recorded by a rebase, and 20-24 buffered past it.
func holed(t *testing.T) *Log {
	t.Helper()
	ctx := context.Background()
	lg := create(t, Config{})
	appendGroups(t, lg, 0, 1)
	if err := lg.ApplyRebase(ctx, Rebase{LogID: lg.ID(), Resume: 20, Hole: Span{Start: 11, End: 20}}); err != nil {
		t.Fatal(err)
	}
	rows := make([][]byte, 5)
	for i := range rows {
		rows[i] = fmt.Appendf(nil, `{"n":%d,"note":"x"}`, 20+i)
	}
	if _, err := lg.Append(ctx, rows, tsAt(1), nil); err != nil {
		t.Fatal(err)
	}
	return lg
}

func TestCountAddsTheTiersFromTheirRecordsAlone(t *testing.T) {
	ctx := context.Background()
	lg, hl := tiered(t), holed(t)
	floored := tiered(t)
	if err := floored.SetFloor(ctx, 50); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		lg       *Log
		from, to int64
		want     int64
	}{
		{"every tier", lg, 1, 131, 130},
		{"inside one file", lg, 3, 8, 5},
		{"files clipped at both ends", lg, 5, 37, 32},
		{"across the files and the buffer", lg, 95, 105, 10},
		{"the buffer alone", lg, 110, 131, 21},
		{"below the first offset", lg, 0, 5, 4},
		{"past the end", lg, 131, 200, 0},
		{"nothing below the floor", floored, 1, 60, 10},
		{"all of it above the floor", floored, 50, 131, 81},
		{"the hole left out of the buffer's extent", hl, 1, 25, 15},
		{"inside the hole", hl, 11, 20, 0},
		{"across the hole's end", hl, 15, 22, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := countRows(ctx, tc.lg.records(), true, tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.want {
				t.Fatalf("countRows [%d,%d) = %d, want %d", tc.from, tc.to, n, tc.want)
			}
		})
	}
}

// TestCountReadsThePublishedTierBelowTheLocalFiles: once clean has taken
// the oldest local files (past staging_max_bytes), only the published
// records hold their rows, and countRows still finds them.
func TestCountReadsThePublishedTierBelowTheLocalFiles(t *testing.T) {
	ctx := context.Background()
	// Each file is under 2 kB: a 5 kB bound keeps the newest two or three.
	lg := create(t, Config{TargetSealBytes: 1, StagingMaxBytes: 5000})
	appendGroups(t, lg, 0, 10)
	for _, step := range []func(context.Context, *Log) error{
		func(ctx context.Context, l *Log) error { _, err := l.Seal(ctx, true); return err },
		func(ctx context.Context, l *Log) error { _, err := l.Publish(ctx, true); return err },
		func(ctx context.Context, l *Log) error { _, err := l.Evict(ctx); return err },
		func(ctx context.Context, l *Log) error { _, err := l.Clean(ctx); return err },
	} {
		if err := step(ctx, lg); err != nil {
			t.Fatal(err)
		}
	}
	local, err := spans(ctx, lg.records(), `SELECT start_offset, end_offset FROM files`)
	if err != nil {
		t.Fatal(err)
	}
	if len(local) == 0 || len(local) >= 10 {
		t.Fatalf("clean left the local files %v; the test wants the newest of them, and the rest only in the published tier", local)
	}
	for _, tiers := range []bool{true, false} {
		want := int64(100)
		if !tiers {
			want = 10 * int64(len(local)) // the local files alone
		}
		n, err := countRows(ctx, lg.records(), tiers, 1, 101)
		if err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("countRows [1,101) with tiers=%v = %d, want %d (local files %v)", tiers, n, want, local)
		}
	}
}

func TestTierQueries(t *testing.T) {
	ctx := context.Background()
	lg, fresh := tiered(t), create(t, Config{})
	q := lg.records()
	for _, tc := range []struct {
		name string
		got  func() (any, error)
		want any
	}{
		{"sealedEnd is where the last file ends", func() (any, error) {
			end, ok, err := sealedEnd(ctx, q, true)
			return [2]any{end, ok}, err
		}, [2]any{int64(101), true}},
		{"sealedEnd of a log never sealed", func() (any, error) {
			end, ok, err := sealedEnd(ctx, fresh.records(), true)
			return [2]any{end, ok}, err
		}, [2]any{int64(0), false}},
		{"earliest is the lowest offset a tier holds", func() (any, error) {
			return earliestOffset(ctx, q, true, 131)
		}, int64(1)},
		{"earliest of an empty log is its end", func() (any, error) {
			return earliestOffset(ctx, fresh.records(), true, 1)
		}, int64(1)},
		{"firstNewer starts at the first file stamped after the cutoff", func() (any, error) {
			off, ok, err := firstNewer(ctx, q, true, tsAt(4)+500_000)
			return [2]any{off, ok}, err
		}, [2]any{int64(51), true}},
		{"firstNewer reaches into the buffer", func() (any, error) {
			off, ok, err := firstNewer(ctx, q, true, tsAt(10))
			return [2]any{off, ok}, err
		}, [2]any{int64(111), true}},
		{"firstNewer past the last stamp", func() (any, error) {
			off, ok, err := firstNewer(ctx, q, true, tsAt(12))
			return [2]any{off, ok}, err
		}, [2]any{int64(0), false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.got()
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReadStatusFiguresEachTier(t *testing.T) {
	ctx := context.Background()
	lg := tiered(t)
	st, err := readStatus(ctx, lg.records(), true, 131, time.UnixMicro(tsAt(20)))
	if err != nil {
		t.Fatal(err)
	}
	want := Status{
		Start: 1, End: 131, BufferedRows: 30, BufferedGroups: 3, LocalFiles: 10, LocalBytes: st.LocalBytes,
		PublishedFiles: 10, PublishedThrough: 100, PublishLagRows: 30,
		PublishLagSecs: 10, // the oldest unpublished row is group 10's, stamped 10 s before now
	}
	if st != want {
		t.Fatalf("readStatus =\n %+v, want\n %+v", st, want)
	}
	if st.LocalBytes <= 0 {
		t.Fatalf("LocalBytes = %d for 10 local files", st.LocalBytes)
	}

	if _, err := lg.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lg.SetFloor(ctx, 40); err != nil {
		t.Fatal(err)
	}
	st, err = readStatus(ctx, lg.records(), true, 131, time.UnixMicro(tsAt(20)))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Fenced || st.Floor != 40 {
		t.Fatalf("after Fence and SetFloor(40): Fenced %v, Floor %d; want true, 40", st.Fenced, st.Floor)
	}
}

func TestSummarizeRollsUpTheRecords(t *testing.T) {
	ctx := context.Background()
	lg := tiered(t)
	s, err := summarize(ctx, lg.records(), lg.Schema(), true, 0, 131)
	if err != nil {
		t.Fatal(err)
	}
	if !s.HasTS || s.FirstTS != tsAt(0) || s.LastTS != tsAt(12) {
		t.Fatalf("stamps %v [%d, %d], want [%d, %d]: the files' and the buffered groups'", s.HasTS, s.FirstTS, s.LastTS, tsAt(0), tsAt(12))
	}
	if s.Stats != nil || s.Nulls != nil {
		t.Fatalf("column figures %v %v while rows 101-130 are only buffered (which keeps none); want nil", s.Stats, s.Nulls)
	}

	// Above the floor, sealed whole: every column's bounds, and each file
	// counted once though it is both local and published.
	if _, err := lg.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	s, err = summarize(ctx, lg.records(), lg.Schema(), true, 41, 131)
	if err != nil {
		t.Fatal(err)
	}
	if s.FirstTS != tsAt(4) || s.LastTS != tsAt(12) {
		t.Fatalf("stamps above floor 41 [%d, %d], want [%d, %d]", s.FirstTS, s.LastTS, tsAt(4), tsAt(12))
	}
	if got := s.Stats["n"]; string(got[0]) != "41" || string(got[1]) != "130" {
		t.Fatalf("n spans %s..%s above floor 41, want 41..130 (stats %v)", got[0], got[1], s.Stats)
	}
	if got := s.Nulls["note"]; got != 18 {
		t.Fatalf("note has %d nulls in 41-130, want 18 (every fifth offset, each file once)", got)
	}
}

func TestHoles(t *testing.T) {
	ctx := context.Background()
	hs, err := readHoles(ctx, holed(t).records())
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0] != (Span{Start: 11, End: 20}) {
		t.Fatalf("readHoles = %v, want [{11 20}]", hs)
	}
	if hs, err := readHoles(ctx, tiered(t).records()); err != nil || hs != nil {
		t.Fatalf("readHoles of a log never restored = %v, %v; want none", hs, err)
	}

	// The hole is no row to publish: the holed log's lag is the 15 rows
	// it holds (1-10 and 20-24), not the 24 offsets below its end.
	if st, err := holed(t).Status(ctx); err != nil || st.End != 25 || st.PublishLagRows != 15 {
		t.Fatalf("Status of the holed log = end %d, publish lag %d rows (%v); want end 25, lag 15", st.End, st.PublishLagRows, err)
	}

	two := []Span{{Start: 11, End: 20}, {Start: 20, End: 25}, {Start: 40, End: 50}}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"holeAt the first offset of a hole", fst(holeAt(two, 11)), Span{Start: 11, End: 20}},
		{"holeAt the end of a hole is the next one's", fst(holeAt(two, 20)), Span{Start: 20, End: 25}},
		{"holeAt an offset no hole holds", snd(holeAt(two, 30)), false},
		{"holeSpans across two adjacent holes", holeSpans(two, 11, 25), true},
		{"holeSpans with a held offset between", holeSpans(two, 11, 41), false},
		{"holeSpans of an empty range", holeSpans(two, 11, 11), false},
		{"holeSpans ending inside a hole", holeSpans(two, 11, 15), false},
		{"heldEnd below holes reaching up to the end", heldEnd(two, 25), int64(11)},
		{"heldEnd with no hole at the end", heldEnd(two, 30), int64(30)},
		{"heldEnd inside a hole", heldEnd(two, 45), int64(40)},
		{"holeRows across two adjacent holes and a held range", holeRows(two, 1, 41), int64(15)},
		{"holeRows clipped at both ends", holeRows(two, 15, 45), int64(15)},
		{"holeRows of a range no hole touches", holeRows(two, 25, 40), int64(0)},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func fst[A, B any](a A, _ B) A { return a }
func snd[A, B any](_ A, b B) B { return b }

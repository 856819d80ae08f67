package history_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/meta/history"
	"github.com/streamcast/streamcast/pkg/wire"
)

// migrated builds a stream of three logs, v1 [1,121), v2 [121,251),
// v3 [251,401), every row published.
func migrated(t *testing.T, onS3 bool) *fixture {
	t.Helper()
	f := newFixture(t, onS3)
	f.create(t, schemaV1)
	f.append(t, 120, true)
	f.migrate(t, schemaV2)
	f.append(t, 130, true)
	f.migrate(t, schemaV3)
	f.append(t, 150, true)
	return f
}

func TestUnionByNameAcrossMigrationsMatchesBruteForceReplay(t *testing.T) {
	f := migrated(t, false)
	r := f.open(t, history.Options{})
	var names []string
	for _, fl := range r.Schema().Fields() {
		names = append(names, fl.Name+fmt.Sprint(map[bool]string{true: "?", false: ""}[fl.Nullable]))
	}
	// id stays required; sym became nullable in v2; px and note are
	// missing from some log, so they read null there.
	if got, want := strings.Join(names, ","), "streamcast_offset,streamcast_ts,id,sym?,px?,note?"; got != want {
		t.Fatalf("schema %s, want %s", got, want)
	}
	if start, end := r.Extent(); start != 1 || end != 401 {
		t.Fatalf("extent [%d,%d), want [1,401)", start, end)
	}
	sameRows(t, scanAll(t, r, history.ScanRequest{}), f.bruteForce(t, 0, 401, nil))

	// A projection returns exactly its columns, in the order asked.
	got := scanAll(t, r, history.ScanRequest{Columns: []string{"note", "streamcast_offset"}})
	want := f.bruteForce(t, 0, 401, nil)
	for _, m := range want {
		for k := range m {
			if k != "note" && k != logstore.OffsetColumn {
				delete(m, k)
			}
		}
	}
	sameRows(t, got, want)
}

func TestRowsAreTheServersCanonicalBytesAndFilterLikeIt(t *testing.T) {
	f := migrated(t, false)
	r := f.open(t, history.Options{})
	var got bytes.Buffer
	err := r.Rows(context.Background(), 100, 300, []byte(`{"sym":["S1",null]}`), func(o, ts int64, row []byte) error {
		fmt.Fprintf(&got, "%d %d %s\n", o, ts, row)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for o := int64(100); o < 300; o++ {
		doc := schemaV1
		switch {
		case o >= 251:
			doc = schemaV3
		case o >= 121:
			doc = schemaV2
		}
		row := rowFor(doc, o)
		if !bytes.Contains(row, []byte(`"sym":"S1"`)) && !bytes.Contains(row, []byte(`"sym":null`)) {
			continue
		}
		fmt.Fprintf(&want, "%d %d %s\n", o, baseTS+o-(o-1)%10, row)
	}
	if got.String() != want.String() {
		t.Fatalf("rows differ:\n got  %.600s\n want %.600s", got.String(), want.String())
	}
}

func TestPruningSkipsLogsAndFilesByStatistics(t *testing.T) {
	f := migrated(t, false)
	r := f.open(t, history.Options{})
	got := scanAll(t, r, history.ScanRequest{Bounds: []history.Bound{{Column: logstore.OffsetColumn, Op: history.OpGe, Values: []any{int64(261)}}}})
	if len(got) != 150 { // bounds never filter rows: the whole v3 log comes back
		t.Fatalf("got %d rows, want the 150 of the last log", len(got))
	}
	st := r.Stats()
	if st.LogsSkipped != 2 {
		t.Fatalf("stats %+v: want the two older logs skipped", st)
	}
	// note exists only in v2: the other logs read null there, so
	// note = "n123" rules them out.
	r2 := f.open(t, history.Options{})
	got = scanAll(t, r2, history.ScanRequest{Bounds: []history.Bound{{Column: "note", Op: history.OpEq, Values: []any{"n123"}}}})
	if len(got) != 130 {
		t.Fatalf("got %d rows, want the 130 rows of v2", len(got))
	}
	if st := r2.Stats(); st.LogsSkipped != 2 || st.FilesOpened == 0 {
		t.Fatalf("stats %+v: want two logs skipped and v2's files opened", st)
	}
}

func TestAsOfOffsetReadsUpToTheOffsetAndRefusesPastThePublishedEnd(t *testing.T) {
	f := migrated(t, false)
	f.append(t, 40, false) // [401,441) only in the buffer
	n := int64(300)
	r := f.open(t, history.Options{AsOfOffset: &n})
	sameRows(t, scanAll(t, r, history.ScanRequest{}), f.bruteForce(t, 0, 301, nil))

	past := int64(420)
	_, err := f.tryOpen(history.Options{AsOfOffset: &past})
	if !history.IsRefusal(err, history.WhyUnpublished) || !strings.Contains(err.Error(), "--as-of-offset 420 is past the published end") || !strings.Contains(err.Error(), "below 401") || !strings.Contains(err.Error(), "--broker") {
		t.Fatalf("as of 420 without a broker: %v", err)
	}
}

func TestAsOfTSReadsPublishedRowsStampedByThenAndRefusesLater(t *testing.T) {
	f := migrated(t, false)
	at := time.UnixMicro(baseTS + 205)
	r := f.open(t, history.Options{AsOfTS: &at})
	want := f.bruteForce(t, 0, 401, func(_, ts int64) bool { return ts <= baseTS+205 })
	sameRows(t, scanAll(t, r, history.ScanRequest{}), want)
	if len(want) != 210 {
		t.Fatalf("want %d rows; the fixture's stamps changed", len(want))
	}

	late := time.UnixMicro(baseTS + 400)
	_, err := f.tryOpen(history.Options{AsOfTS: &late})
	if !history.IsRefusal(err, history.WhyUnpublished) || !strings.Contains(err.Error(), "later than what is published") {
		t.Fatalf("as of a time past the newest published row: %v", err)
	}
}

func TestOpenRefusesAnotherStreamID(t *testing.T) {
	f := migrated(t, false)
	_, err := f.tryOpen(history.Options{StreamID: "00000000-0000-4000-8000-000000000000"})
	if !history.IsRefusal(err, history.WhyStreamID) || !strings.Contains(err.Error(), "00000000-0000-4000-8000-000000000000") {
		t.Fatalf("another stream id: %v", err)
	}
}

func TestRemoteReadWithOnlyTheS3MetadataURI(t *testing.T) {
	f := migrated(t, true)
	want := f.bruteForce(t, 0, 401, nil)
	// The server's root is gone: only the bucket is left to read.
	if err := os.Rename(f.root, f.root+".gone"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Rename(f.root+".gone", f.root) })
	uri := "s3://" + testkit.Bucket + "/tables/" + stream + "/" + stream + ".metadata/version-hint.text"
	r := f.open(t, history.Options{MetadataURI: uri})
	sameRows(t, scanAll(t, r, history.ScanRequest{}), want)

	var frames int
	if err := r.Rows(context.Background(), 0, 0, nil, func(int64, int64, []byte) error { frames++; return nil }); err != nil || frames != 400 {
		t.Fatalf("Rows over S3: %d rows, %v; want 400", frames, err)
	}
}

// commit edits the stream's metadata as a lifecycle step would.
func (f *fixture) commit(t *testing.T, edit func(m *meta.Metadata)) {
	t.Helper()
	st := f.store(t)
	m, err := st.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m = m.Clone()
	edit(m)
	if _, err := st.Commit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

func TestReadsBelowTheRetentionFloorAreRefused(t *testing.T) {
	f := migrated(t, false)
	floor := int64(100)
	f.commit(t, func(m *meta.Metadata) { m.Retention.Floor = &floor })
	r := f.open(t, history.Options{})
	if start, end := r.Extent(); start != 100 || end != 401 {
		t.Fatalf("extent [%d,%d), want [100,401)", start, end)
	}
	// The default read starts at the floor, never below it.
	sameRows(t, scanAll(t, r, history.ScanRequest{}), f.bruteForce(t, 100, 401, nil))

	err := r.Rows(context.Background(), 50, 0, nil, func(int64, int64, []byte) error { return nil })
	if !history.IsRefusal(err, history.WhyBelowFloor) || !strings.Contains(err.Error(), "offset 50 is below 100") || !strings.Contains(err.Error(), "rows 50 to 99 were deleted") {
		t.Fatalf("rows from 50: %v", err)
	}
	if _, err := r.Scan(context.Background(), history.ScanRequest{From: 99}); !history.IsRefusal(err, history.WhyBelowFloor) {
		t.Fatalf("scan from 99: %v", err)
	}
	n := int64(99)
	if _, err := f.tryOpen(history.Options{AsOfOffset: &n}); !history.IsRefusal(err, history.WhyBelowFloor) || !strings.Contains(err.Error(), "--as-of-offset 99 is below 100") {
		t.Fatalf("as of 99: %v", err)
	}

	// A catch-up from below what the tables hold names both numbers; from
	// earliest (0) it takes what is left.
	uri := f.store(t).PublishedHintURI()
	none := func(int64, int64, []byte) error { return nil }
	_, err = history.CatchUp(context.Background(), history.CatchUpOptions{MetadataURI: uri}, 50, none)
	if !history.IsRefusal(err, history.WhyBelowFloor) || !strings.Contains(err.Error(), "the published tables hold offsets 100 to 400, so rows 50 to 99 are in no tier") {
		t.Fatalf("catch-up from 50: %v", err)
	}
	var first int64
	next, err := history.CatchUp(context.Background(), history.CatchUpOptions{MetadataURI: uri}, 0, func(o int64, _ int64, _ []byte) error {
		if first == 0 {
			first = o
		}
		return nil
	})
	if err != nil || first != 100 || next != 401 {
		t.Fatalf("catch-up from earliest: first %d, next %d, %v; want 100 and 401", first, next, err)
	}
}

func TestARetiredLogWhoseTableLostRowsIsRefused(t *testing.T) {
	f := newFixture(t, false)
	f.create(t, schemaV1)
	f.append(t, 50, true)  // the table holds 1..50
	f.append(t, 30, false) // 51..80 never reach it
	end := int64(81)
	f.commit(t, func(m *meta.Metadata) {
		m.Logs[0].State, m.Logs[0].EndOffset = meta.Retired, &end
		m.Retirement = &meta.Retirement{At: baseTS, EndOffset: end}
	})
	r := f.open(t, history.Options{})
	rr, err := r.Scan(context.Background(), history.ScanRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	for rr.Next() {
	}
	err = rr.Err()
	if !history.IsRefusal(err, history.WhyShortTable) || !strings.Contains(err.Error(), "retired log trades: its published table holds 50 of the 80 rows in offsets [1,81); rows 51 to 80 are in no published file") {
		t.Fatalf("scan of the short retired log: %v", err)
	}
	// A read that stays inside what the table holds is exact, so it is
	// answered.
	var got int
	if err := r.Rows(context.Background(), 1, 51, nil, func(int64, int64, []byte) error { got++; return nil }); err != nil || got != 50 {
		t.Fatalf("rows [1,51): %d, %v", got, err)
	}
}

func TestAsOfOffsetPastThePublishedEndReadsTheRestFromTheBroker(t *testing.T) {
	f := newFixture(t, false)
	cfg := config.Default()
	cfg.Listen, cfg.Root, cfg.Maintain.Enabled = "127.0.0.1:0", f.root, false
	st := config.DefaultStream(stream)
	st.Schema = config.RawJSON(schemaV1)
	cfg.Streams = []config.Stream{st}
	base := brokertest.Start(t, cfg)
	url := base + "/" + stream
	ctx := context.Background()
	pub, err := wire.Publish(ctx, url, wire.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	send := func(from, n int) {
		var rows [][]byte
		for o := from; o < from+n; o++ {
			rows = append(rows, rowFor(schemaV1, int64(o)))
		}
		if _, err := pub.SendBatch(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	send(1, 100)
	lg, err := logstore.Open(f.lay.LogDir(stream, stream), logstore.Maintainer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Publish(ctx, true); err != nil {
		t.Fatal(err)
	}
	_ = lg.Close()
	send(101, 50) // 101..150 only on the server

	n := int64(140)
	r := f.open(t, history.Options{AsOfOffset: &n, Broker: url})
	if _, end := r.Extent(); end != 141 {
		t.Fatalf("end %d, want 141", end)
	}
	sameRows(t, scanAll(t, r, history.ScanRequest{}), f.bruteForce(t, 0, 141, nil))
	var frames bytes.Buffer
	if err := r.Rows(ctx, 95, 0, nil, func(o, ts int64, row []byte) error { fmt.Fprintf(&frames, "%d %s\n", o, row); return nil }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(frames.String(), "\n"); got != 46 || !strings.HasSuffix(frames.String(), "140 "+string(rowFor(schemaV1, 140))+"\n") {
		t.Fatalf("rows 95..140 across the published end:\n%s", frames.String())
	}

	_, err = f.tryOpen(history.Options{AsOfOffset: &n, Broker: url, MaxTail: 10})
	if !history.IsRefusal(err, history.WhyMaxTail) || !strings.Contains(err.Error(), "offsets 101 to 140 are past the published end, 40 rows, more than --max-tail 10") {
		t.Fatalf("max tail 10: %v", err)
	}
	ahead := int64(151)
	_, err = f.tryOpen(history.Options{AsOfOffset: &ahead, Broker: url})
	if !history.IsRefusal(err, history.WhyNoTier) || !strings.Contains(err.Error(), "past the server's frontier 151") {
		t.Fatalf("as of 151: %v", err)
	}
}

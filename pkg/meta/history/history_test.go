package history_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta/history"
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

//go:build linux

package meta

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
)

// TestResolveRefusesAnEmptyHomeOverPublishedHistory is the hole of issue
// 10: the home is empty (a wiped disk, a new machine), the published
// prefix holds something of the stream; nothing may start afresh.
func TestResolveRefusesAnEmptyHomeOverPublishedHistory(t *testing.T) {
	mk := newEnvMaker(t)
	cases := []struct {
		name  string
		put   []string // objects under <prefix>/trades/
		full  bool     // a real stream served and its home then lost
		found string
	}{
		{name: "home lost, published copy kept", full: true, found: "its metadata (version 1, stream_id "},
		{name: "only a table", put: []string{"trades/metadata/v1.metadata.json"}, found: "the table(s) trades"},
		{name: "only a WAL replica", put: []string{"_wal/trades/generation"}, found: "a WAL replica (_wal/)"},
		{name: "only metadata files", put: []string{"trades.metadata.json"}, found: "metadata files"},
	}
	for _, kind := range mk.kinds() {
		for _, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				e := mk.env(t, kind)
				st := e.store(t, "trades")
				if tc.full {
					m, acked, err := start(t, e, st, 3)
					if err != nil || len(acked) != 3 {
						t.Fatalf("first start: %v", err)
					}
					if err := os.RemoveAll(e.root); err != nil {
						t.Fatal(err)
					}
					tc.found += m.StreamID
				}
				for _, p := range tc.put {
					e.putPublished(t, "trades/"+p, []byte("{}"))
				}
				_, acked, err := start(t, e, st, 3)
				var he *HistoryError
				if !errors.As(err, &he) || !errors.Is(err, ErrExistingHistory) {
					t.Fatalf("start over an empty home: %v, acknowledged %v; want a *HistoryError", err, acked)
				}
				for _, want := range []string{`stream "trades"`, tc.found, "streamcast restore trades", "point published at an empty prefix", "I8"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("the refusal lacks %q:\n%v", want, err)
					}
				}
				if _, err := os.Stat(e.layout(t).StreamDir("trades")); !os.IsNotExist(err) {
					t.Errorf("the refused start made the home: %v", err)
				}
			})
		}
	}
}

// TestResolveTreatsAMissingPrefixAsEmpty: a missing bucket or directory
// holds nothing, so a new stream starts.
func TestResolveTreatsAMissingPrefixAsEmpty(t *testing.T) {
	mk := newEnvMaker(t)
	for _, kind := range mk.kinds() {
		t.Run(kind, func(t *testing.T) {
			e := mk.env(t, kind)
			if kind == "s3" {
				e.pub = "s3://no-such-bucket/p"
			}
			res, err := Resolve(context.Background(), e.store(t, "trades"))
			if err != nil || res.Outcome != Absent || res.Metadata != nil {
				t.Fatalf("Resolve = %+v, %v; want Absent", res, err)
			}
		})
	}
}

// TestLostMetadataIsAdoptedNotMinted: the home lost its metadata but kept
// its log; the published copy's id is adopted, and offsets go on.
func TestLostMetadataIsAdoptedNotMinted(t *testing.T) {
	mk := newEnvMaker(t)
	for _, kind := range mk.kinds() {
		t.Run(kind, func(t *testing.T) {
			e := mk.env(t, kind)
			st := e.store(t, "trades")
			seen := acks{}
			m1, a, err := start(t, e, st, 3)
			if err != nil {
				t.Fatal(err)
			}
			seen.add(t, a)
			loseHomeMetadata(t, e.layout(t), "trades")
			res, err := Resolve(context.Background(), st)
			if err != nil || res.Outcome != Adopted || res.Metadata.StreamID != m1.StreamID {
				t.Fatalf("Resolve after losing the home's metadata = %+v, %v; want the id %s adopted", res, err, m1.StreamID)
			}
			m2, a, err := start(t, e, st, 3)
			if err != nil || m2.StreamID != m1.StreamID {
				t.Fatalf("the start after adoption: %v, id %v", err, m2)
			}
			seen.add(t, a)
			if home, err := st.Load(context.Background()); err != nil || home.StreamID != m1.StreamID {
				t.Fatalf("the home holds %+v, %v", home, err)
			}
		})
	}
}

// TestPreMetadataLogsAreRecordedOnce: no metadata anywhere, a log from
// before metadata: one id is minted, and every later start keeps it.
func TestPreMetadataLogsAreRecordedOnce(t *testing.T) {
	mk := newEnvMaker(t)
	for _, kind := range mk.kinds() {
		t.Run(kind, func(t *testing.T) {
			e := mk.env(t, kind)
			st := e.store(t, "trades")
			if _, _, err := start(t, e, st, 2); err != nil {
				t.Fatal(err)
			}
			// Make it a log from before metadata: none at home, none
			// published.
			loseHomeMetadata(t, e.layout(t), "trades")
			dropPublished(t, e, "trades")

			res, err := Resolve(context.Background(), st)
			if err != nil || res.Outcome != Upgraded {
				t.Fatalf("Resolve = %+v, %v; want Upgraded", res, err)
			}
			id := res.Metadata.StreamID
			if cur := res.Metadata.Current(); cur == nil || cur.Name != "trades" || cur.StartOffset != 1 || cur.LogID == "" {
				t.Fatalf("the upgrade recorded %+v", cur)
			}
			for range 2 {
				res, err := Resolve(context.Background(), st)
				if err != nil || res.Outcome != Found || res.Metadata.StreamID != id {
					t.Fatalf("a later Resolve = %+v, %v; want the id %s found", res, err, id)
				}
			}
			if pub, err := st.LoadPublished(context.Background()); err != nil || pub.StreamID != id {
				t.Fatalf("the published copy: %+v, %v", pub, err)
			}
		})
	}
}

// dropPublished removes the stream's published metadata (not its tables).
func dropPublished(t *testing.T, e testEnv, stream string) {
	t.Helper()
	st := e.store(t, stream)
	p := st.pub
	for _, v := range e.publishedVersions(t, stream) {
		if err := p.remove(context.Background(), st.versionName(v)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{st.hintName(), st.plainName()} {
		if err := p.remove(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.LoadPublished(context.Background()); !errors.Is(err, ErrNoMetadata) {
		t.Fatalf("published metadata still there: %v", err)
	}
}

// TestCrashesAroundAdoptionNeverReissueAnOffset injects a crash at each
// step of the writes that adoption and the upgrade make, then starts the
// stream twice more: the id never changes and no offset is acknowledged
// twice.
func TestCrashesAroundAdoptionNeverReissueAnOffset(t *testing.T) {
	mk := newEnvMaker(t)
	cases := []struct {
		name    string
		prepare func(t *testing.T, e testEnv)
		point   string
	}{
		{"metadata lost, crash before the home is written", func(t *testing.T, e testEnv) { loseHomeMetadata(t, e.layout(t), "trades") }, "adopt"},
		{"no metadata anywhere, crash after the published copy", func(t *testing.T, e testEnv) {
			loseHomeMetadata(t, e.layout(t), "trades")
			dropPublished(t, e, "trades")
		}, "published"},
	}
	for _, kind := range mk.kinds() {
		for _, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				e := mk.env(t, kind)
				st := e.store(t, "trades")
				seen := acks{}
				m, a, err := start(t, e, st, 3)
				if err != nil {
					t.Fatal(err)
				}
				seen.add(t, a)
				tc.prepare(t, e)
				crash := errors.New("injected crash")
				st.failAt = func(p string) error {
					if p == tc.point {
						return crash
					}
					return nil
				}
				if _, a, err := start(t, e, st, 3); !errors.Is(err, crash) || len(a) > 0 {
					t.Fatalf("the crashed start: %v, acknowledged %v", err, a)
				}
				st.failAt = nil
				var id string
				for i := range 2 {
					m2, a, err := start(t, e, st, 3)
					if err != nil {
						t.Fatalf("start %d after the crash: %v", i+1, err)
					}
					seen.add(t, a)
					if id == "" {
						id = m2.StreamID
					}
					if m2.StreamID != id {
						t.Fatalf("start %d after the crash has id %s, the one before %s", i+1, m2.StreamID, id)
					}
				}
				if tc.point == "adopt" && id != m.StreamID {
					t.Fatalf("adoption minted %s over %s", id, m.StreamID)
				}
				if len(seen) != 9 {
					t.Fatalf("%d offsets acknowledged, want 9", len(seen))
				}
			})
		}
	}
}

// TestAnExistingHomeNeverLists: a stream on this disk costs no listing of
// the prefix.
func TestAnExistingHomeNeverLists(t *testing.T) {
	mk := newEnvMaker(t)
	for _, kind := range mk.kinds() {
		t.Run(kind, func(t *testing.T) {
			e := mk.env(t, kind)
			st := e.store(t, "trades")
			if _, _, err := start(t, e, st, 1); err != nil {
				t.Fatal(err)
			}
			if st.lists.Load() != 1 {
				t.Fatalf("a new stream listed the prefix %d times, want 1", st.lists.Load())
			}
			st.lists.Store(0)
			for range 3 {
				if _, _, err := start(t, e, st, 1); err != nil {
					t.Fatal(err)
				}
			}
			if n := st.lists.Load(); n != 0 {
				t.Fatalf("starts of a stream on this disk listed the prefix %d times", n)
			}
		})
	}
}

// TestAdoptedRetirementIsSeen: a retired stream whose home lost its
// metadata gets its retirement back with the adopted copy, before any
// row or log is made.
func TestAdoptedRetirementIsSeen(t *testing.T) {
	mk := newEnvMaker(t)
	for _, kind := range mk.kinds() {
		t.Run(kind, func(t *testing.T) {
			e := mk.env(t, kind)
			st := e.store(t, "trades")
			m, _, err := start(t, e, st, 3)
			if err != nil {
				t.Fatal(err)
			}
			r := m.Clone()
			r.Retirement = &Retirement{At: 1_700_000_000_000_000, EndOffset: 4}
			r.Logs[0].State = Retired
			if _, err := st.Commit(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			loseHomeMetadata(t, e.layout(t), "trades")
			got, a, err := start(t, e, st, 3)
			if err != nil || !got.Retired() || got.Retirement.EndOffset != 4 || len(a) != 0 {
				t.Fatalf("start of a retired stream that lost its metadata: %+v, acknowledged %v, %v", got, a, err)
			}
		})
	}
}

// TestAdoptionRefusesAnotherLog: the published copy names a log with
// another id than the one on disk (a log made afresh under the same name).
func TestAdoptionRefusesAnotherLog(t *testing.T) {
	mk := newEnvMaker(t)
	for _, kind := range mk.kinds() {
		t.Run(kind, func(t *testing.T) {
			e := mk.env(t, kind)
			st := e.store(t, "trades")
			m, _, err := start(t, e, st, 1)
			if err != nil {
				t.Fatal(err)
			}
			other := m.Clone()
			other.Logs[0].LogID = "someone-else"
			if _, err := st.Commit(context.Background(), other); err != nil {
				t.Fatal(err)
			}
			loseHomeMetadata(t, e.layout(t), "trades")
			if _, a, err := start(t, e, st, 1); !errors.Is(err, ErrWrongLog) || len(a) != 0 {
				t.Fatalf("start over another log: %v, acknowledged %v; want ErrWrongLog", err, a)
			}
		})
	}
}

// TestAHomeBehindItsPublishedCopyCatchesUp: a commit that wrote its
// published copy and stopped is finished by the next Resolve.
func TestAHomeBehindItsPublishedCopyCatchesUp(t *testing.T) {
	mk := newEnvMaker(t)
	for _, kind := range mk.kinds() {
		t.Run(kind, func(t *testing.T) {
			e := mk.env(t, kind)
			st := e.store(t, "trades")
			m, _, err := start(t, e, st, 1)
			if err != nil {
				t.Fatal(err)
			}
			next := m.Clone()
			next.Retention.MaxAge = new("7d")
			commitPublishedOnly(t, st, next)
			res, err := Resolve(context.Background(), st)
			if err != nil || res.Outcome != CaughtUp || res.Metadata.Version != 2 || *res.Metadata.Retention.MaxAge != "7d" {
				t.Fatalf("Resolve = %+v, %v; want version 2 caught up", res, err)
			}
			if home, err := st.Load(context.Background()); err != nil || home.Version != 2 {
				t.Fatalf("the home: %+v, %v", home, err)
			}
		})
	}
}

// A log from before metadata that starts past offset 1 (a successor log)
// is recorded at the first offset it stores, not at 1: a reader of the
// metadata must never be told offsets exist that the log never held.
func TestAnUpgradeRecordsTheStartTheLogStores(t *testing.T) {
	mk := newEnvMaker(t)
	e := mk.env(t, "file")
	st := e.store(t, "trades")
	lay := e.layout(t)
	if err := os.MkdirAll(lay.StreamDir("trades"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := logstore.Config{Stream: "trades", Log: "trades", Published: lay.StoredPublished("trades", "trades"), Start: 5}
	lg, err := logstore.Create(lay.LogDir("trades", "trades"), schema.Any(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := Resolve(context.Background(), st)
	if err != nil || res.Outcome != Upgraded {
		t.Fatalf("Resolve = %+v, %v; want Upgraded", res, err)
	}
	if cur := res.Metadata.Current(); cur == nil || cur.StartOffset != 5 {
		t.Fatalf("the upgrade recorded %+v; want start_offset 5, the log's own", cur)
	}
}

// TestResolveParsesAPublishedCopyLikeTheHomeOnce: the published copy of a
// stream at rest is the home's version file byte for byte, so Resolve
// parses one document, not two (a migration resolves its stream several
// times, each parse a pass over every log the stream ever had); a copy
// that differs is still parsed, and a home behind it still catches up.
func TestResolveParsesAPublishedCopyLikeTheHomeOnce(t *testing.T) {
	e := fileEnv(t)
	st := e.store(t, "trades")
	m := commits(t, st, 3, nil)
	st.parses.Store(0)
	res, err := Resolve(context.Background(), st)
	if err != nil || res.Outcome != Found || res.Metadata.Version != 3 {
		t.Fatalf("Resolve = %+v, %v; want version 3 found", res, err)
	}
	if n := st.parses.Load(); n != 1 {
		t.Fatalf("Resolve parsed %d metadata documents for two identical copies, want 1", n)
	}

	next := m.Clone()
	next.Retention.MaxAge = new("7d")
	commitPublishedOnly(t, st, next)
	st.parses.Store(0)
	res, err = Resolve(context.Background(), st)
	if err != nil || res.Outcome != CaughtUp || res.Metadata.Version != 4 || *res.Metadata.Retention.MaxAge != "7d" {
		t.Fatalf("Resolve = %+v, %v; want version 4 caught up", res, err)
	}
	if n := st.parses.Load(); n != 2 {
		t.Fatalf("Resolve parsed %d metadata documents for a published copy ahead of the home, want 2", n)
	}
}

// commitPublishedOnly commits next as a crash between the two places
// leaves it: the published copy written, the home's not.
func commitPublishedOnly(t *testing.T, st *Store, next *Metadata) {
	t.Helper()
	st.failAt = func(p string) error {
		if p == "published" {
			return errors.New("crash")
		}
		return nil
	}
	defer func() { st.failAt = nil }()
	if _, err := st.Commit(context.Background(), next); err == nil {
		t.Fatal("the injected crash did not stop the commit")
	}
}

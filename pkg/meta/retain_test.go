//go:build linux

package meta

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
)

// testClock is a clock a test moves by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// agedStream is a stream of one log whose rows carry chosen stamps:
//
//	[1,11)   at t0        sealed and published: file 1
//	[11,16)  at t0+1h  ┐  sealed and published together: file 2,
//	[16,21)  at t0+3h  ┘  which straddles a cutoff of t0+2h
//	[21,31)  at t0+4h     buffered
//
// It returns the store, the clock (at t0+4h) and the log's directory; the
// writer is closed again, as a stopped server's would be.
func agedStream(t testing.TB, e testEnv, stream string) (*Store, *testClock, string, time.Time) {
	t.Helper()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &testClock{t: t0}
	st := e.store(t, stream)
	lay := e.layout(t)
	if err := os.MkdirAll(lay.StreamDir(stream), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := logstore.Config{Stream: stream, Log: stream, Published: lay.StoredPublished(stream, stream), S3: e.s3}
	dir := lay.LogDir(stream, stream)
	lg, err := logstore.Create(dir, schema.Any(), cfg, logstore.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	add := func(n int, ts time.Time) {
		t.Helper()
		rows := make([][]byte, n)
		for i := range rows {
			rows[i] = []byte(`{"i":` + strconv.Itoa(i) + `}`)
		}
		if _, err := lg.Append(ctx, rows, ts.UnixMicro(), nil); err != nil {
			t.Fatal(err)
		}
	}
	cut := func() {
		t.Helper()
		if _, err := lg.Seal(ctx, true); err != nil {
			t.Fatal(err)
		}
		if _, err := lg.Publish(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	add(10, t0)
	cut()
	add(5, t0.Add(time.Hour))
	add(5, t0.Add(3*time.Hour))
	cut()
	add(10, t0.Add(4*time.Hour))
	clk.Set(t0.Add(4 * time.Hour))

	m, err := New(stream)
	if err != nil {
		t.Fatal(err)
	}
	d, err := DescribeLog(lg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddLog(d, lg.Schema()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctx, m); err != nil {
		t.Fatal(err)
	}
	return st, clk, dir, t0
}

// logState reads a log's floor, earliest offset and file counts, through
// a read-only handle, as a server's replay would see them.
func logState(t *testing.T, dir string) (earliest int64, s logstore.Status) {
	t.Helper()
	lg, err := logstore.Open(dir, logstore.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	earliest, _, err = lg.Extent(context.Background())
	if err == nil {
		s, err = lg.Status(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	return earliest, s
}

func TestRetainPublishesTheFloorThenDeletesAfterTheGrace(t *testing.T) {
	mk := newEnvMaker(t)
	for _, kind := range mk.kinds() {
		t.Run(kind, func(t *testing.T) { testRetainFloorGraceDeletion(t, mk.env(t, kind)) })
	}
}

func testRetainFloorGraceDeletion(t *testing.T, e testEnv) {
	ctx := context.Background()
	st, clk, dir, t0 := agedStream(t, e, "trades")
	if _, changed, err := SetMaxAge(ctx, st, "2h"); err != nil || !changed {
		t.Fatalf("SetMaxAge: changed %t, %v", changed, err)
	}
	opts := RetainOptions{Clock: clk.Now, Grace: 30 * time.Minute}

	// Half 1 at t0+4h: the cutoff t0+2h falls inside file 2, which stays
	// whole; the floor is its start.
	r, err := Retain(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Moved || r.Floor != 11 || r.Pending != 1 || r.Taken() != 0 {
		t.Fatalf("first pass: %+v; want the floor moved to 11, one deletion pending, nothing deleted", r)
	}
	for _, load := range []func(context.Context) (*Metadata, error){st.LoadPublished, st.Load} {
		m, err := load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pd := m.Retention.PendingDeletions
		if m.Retention.Floor == nil || *m.Retention.Floor != 11 || len(pd) != 1 ||
			pd[0] != (PendingDeletion{Log: "trades", Below: 11, NotBefore: t0.Add(4*time.Hour + 30*time.Minute).UnixMicro()}) {
			t.Fatalf("metadata version %d: floor %v, pending %+v; want floor 11 and one deletion below 11 from t0+4h30m", m.Version, m.Retention.Floor, pd)
		}
		// The floor's commit rolls up the log's stamps from its records:
		// file 2 (from t0+1h, straddling the floor) to the buffer (t0+4h).
		lg := m.Logs[0]
		if lg.FirstTS == nil || *lg.FirstTS != t0.Add(time.Hour).UnixMicro() || lg.LastTS == nil || *lg.LastTS != t0.Add(4*time.Hour).UnixMicro() {
			t.Fatalf("metadata version %d: log stamps %v..%v; want t0+1h..t0+4h", m.Version, lg.FirstTS, lg.LastTS)
		}
	}
	earliest, s := logState(t, dir)
	if earliest != 11 || s.Floor != 11 || s.LocalFiles != 2 || s.PublishedFiles != 2 {
		t.Fatalf("after the floor moved: earliest %d, %+v; want earliest 11 and both files still there", earliest, s)
	}

	// Within the grace nothing goes, however often the pass runs.
	clk.Set(t0.Add(4*time.Hour + 30*time.Minute - time.Second))
	if r, err = Retain(ctx, st, opts); err != nil || r.Moved || r.Taken() != 0 || r.Pending != 1 {
		t.Fatalf("pass within the grace: %+v, %v; want nothing moved or deleted", r, err)
	}
	if _, s := logState(t, dir); s.LocalFiles != 2 || s.PublishedFiles != 2 {
		t.Fatalf("within the grace: %+v; want both files", s)
	}

	// After it, a fresh store (a restarted child) finds the pending
	// deletion in the metadata and runs it: file 1 goes from both tiers;
	// file 2 straddles the floor and stays.
	clk.Set(t0.Add(4*time.Hour + 30*time.Minute))
	st = e.store(t, "trades")
	if r, err = Retain(ctx, st, opts); err != nil {
		t.Fatal(err)
	}
	if r.Deleted.LocalFiles != 1 || r.Deleted.PublishedFiles != 1 || r.Pending != 0 {
		t.Fatalf("pass after the grace: %+v; want file 1 deleted locally and from the table, nothing pending", r)
	}
	earliest, s = logState(t, dir)
	if earliest != 11 || s.LocalFiles != 1 || s.PublishedFiles != 1 {
		t.Fatalf("after the deletion: earliest %d, %+v; want earliest 11 and file 2 kept", earliest, s)
	}
	if m, err := st.LoadPublished(ctx); err != nil || len(m.Retention.PendingDeletions) != 0 {
		t.Fatalf("published metadata after the deletion: %+v, %v; want no pending deletion", m, err)
	}

	// Once every row is older than the window, the floor is the end.
	clk.Set(t0.Add(7 * time.Hour))
	if r, err = Retain(ctx, st, opts); err != nil || r.Floor != 31 {
		t.Fatalf("pass with every row old: %+v, %v; want the floor at the end, 31", r, err)
	}
	if earliest, _ := logState(t, dir); earliest != 31 {
		t.Fatalf("earliest %d; want 31 once every row is past the window", earliest)
	}
}

func TestARetainPassCutShortAfterPublishingIsFinishedByTheNext(t *testing.T) {
	ctx := context.Background()
	e := testEnv{kind: "file", root: t.TempDir() + "/root", pub: "file://" + t.TempDir() + "/pub"}
	st, clk, dir, _ := agedStream(t, e, "trades")
	if _, _, err := SetMaxAge(ctx, st, "2h"); err != nil {
		t.Fatal(err)
	}
	crash := errors.New("crash")
	st.failAt = func(point string) error {
		if point == "published" {
			return crash
		}
		return nil
	}
	if _, err := Retain(ctx, st, RetainOptions{Clock: clk.Now}); !errors.Is(err, crash) {
		t.Fatalf("Retain with a crash after the published write: %v", err)
	}
	// The published copy is the commit point: it names the floor first,
	// and no log refuses below a floor before it is published.
	pub, err := st.LoadPublished(ctx)
	if err != nil || pub.Retention.Floor == nil || *pub.Retention.Floor != 11 {
		t.Fatalf("published copy after the crash: %+v, %v; want floor 11", pub, err)
	}
	if home, err := st.Load(ctx); err != nil || home.Retention.Floor != nil {
		t.Fatalf("home after the crash: %+v, %v; want no floor yet", home, err)
	}
	if earliest, _ := logState(t, dir); earliest != 1 {
		t.Fatalf("earliest %d after the crash; want 1: the log follows the metadata, never leads it", earliest)
	}
	st = e.store(t, "trades") // restarted
	r, err := Retain(ctx, st, RetainOptions{Clock: clk.Now})
	if err != nil || r.Floor != 11 || r.Pending != 1 {
		t.Fatalf("the next pass: %+v, %v; want floor 11 and its deletion pending", r, err)
	}
	if earliest, _ := logState(t, dir); earliest != 11 {
		t.Fatalf("earliest %d after the next pass; want 11", earliest)
	}
}

func TestMaxAgeNoneStopsTheFloorButKeepsWhatIsGone(t *testing.T) {
	ctx := context.Background()
	e := testEnv{kind: "file", root: t.TempDir() + "/root", pub: "file://" + t.TempDir() + "/pub"}
	st, clk, dir, t0 := agedStream(t, e, "trades")
	if _, _, err := SetMaxAge(ctx, st, "2h"); err != nil {
		t.Fatal(err)
	}
	if _, err := Retain(ctx, st, RetainOptions{Clock: clk.Now}); err != nil {
		t.Fatal(err)
	}
	m, changed, err := SetMaxAge(ctx, st, "none")
	if err != nil || !changed || m.Retention.MaxAge != nil {
		t.Fatalf("SetMaxAge none: %+v, %t, %v", m, changed, err)
	}
	if _, changed, err := SetMaxAge(ctx, st, "none"); err != nil || changed {
		t.Fatalf("SetMaxAge none again: changed %t, %v; want an unchanged window to write nothing", changed, err)
	}
	clk.Set(t0.Add(30 * 24 * time.Hour))
	r, err := Retain(ctx, st, RetainOptions{Clock: clk.Now})
	if err != nil || r.Moved || r.Floor != 11 {
		t.Fatalf("pass without a window: %+v, %v; want the floor to stay at 11", r, err)
	}
	if earliest, _ := logState(t, dir); earliest != 11 {
		t.Fatalf("earliest %d; want 11: what retention hid stays hidden", earliest)
	}
	// The deletion already pending still runs: none stops further
	// deletion, not the one the floor already promised.
	if r.Pending != 0 || r.Deleted.LocalFiles != 1 {
		t.Fatalf("pass without a window: %+v; want the pending deletion done", r)
	}
}

func TestSetMaxAgeRefusesBadWindowsAndUnknownStreams(t *testing.T) {
	ctx := context.Background()
	e := testEnv{kind: "file", root: t.TempDir() + "/root", pub: "file://" + t.TempDir() + "/pub"}
	st := e.store(t, "ghost")
	if _, _, err := SetMaxAge(ctx, st, "30d"); err == nil || !strings.Contains(err.Error(), "no logs and no metadata") {
		t.Fatalf("SetMaxAge on a stream with nothing: %v", err)
	}
	for _, bad := range []string{"", "30", "1.5d", "0h", "1y"} {
		if _, _, err := SetMaxAge(ctx, st, bad); err == nil || !strings.Contains(err.Error(), "max age") {
			t.Errorf("SetMaxAge(%q): %v; want a refusal naming the max age", bad, err)
		}
	}
}

func TestConcurrentRetainsEachLandOnce(t *testing.T) {
	ctx := context.Background()
	e := testEnv{kind: "file", root: t.TempDir() + "/root", pub: "file://" + t.TempDir() + "/pub"}
	st, _, _, _ := agedStream(t, e, "trades")
	before, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ages := []string{"1d", "2d", "3d", "4d"}
	errs := make([]error, len(ages))
	var wg sync.WaitGroup
	for i, age := range ages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each writer is its own store, as separate retain processes are.
			_, _, errs[i] = SetMaxAge(ctx, e.store(t, "trades"), age)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("retain --max-age %s: %v; a lost compare-and-swap must be retried", ages[i], err)
		}
	}
	after, err := st.LoadPublished(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version+len(ages) {
		t.Fatalf("version %d after %d windows set from version %d; want one version each", after.Version, len(ages), before.Version)
	}
}

// TestRetainLogFindsTheStreamOfItsLog: the retain role knows only a log's
// directory; RetainLog finds its stream's home, root and published prefix
// (here the default <root>/published, which the log stores relative to
// itself) and runs the pass on the same metadata serve wrote.
func TestRetainLogFindsTheStreamOfItsLog(t *testing.T) {
	ctx := context.Background()
	e := testEnv{kind: "file", root: t.TempDir() + "/root"}
	st, clk, dir, _ := agedStream(t, e, "trades")
	if _, _, err := SetMaxAge(ctx, st, "2h"); err != nil {
		t.Fatal(err)
	}
	lg, err := logstore.Open(dir, logstore.Maintainer, logstore.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	r, err := RetainLog(ctx, lg, RetainOptions{Clock: clk.Now})
	if err != nil || r.Floor != 11 || !r.Moved {
		t.Fatalf("RetainLog: %+v, %v; want the floor moved to 11", r, err)
	}
	pub, err := st.LoadPublished(ctx)
	if err != nil || pub.Retention.Floor == nil || *pub.Retention.Floor != 11 {
		t.Fatalf("published metadata: %+v, %v; want floor 11 under the default prefix", pub, err)
	}
	if pd := pub.Retention.PendingDeletions; len(pd) != 1 || pd[0].NotBefore != clk.Now().Add(logstore.DefaultRetentionGrace).UnixMicro() {
		t.Fatalf("pending %+v; want one, due after the log's retention grace", pd)
	}
}

// TestAFloorMovingEveryPassKeepsAFewPendingDeletions: passes far more
// frequent than the grace (retain_every 1m, grace 1h) move the floor each
// time; their deletions share one entry per quarter of the grace, so the
// metadata holds a handful, and each is still due no earlier than a full
// grace after the floor it covers was published.
func TestAFloorMovingEveryPassKeepsAFewPendingDeletions(t *testing.T) {
	ctx := context.Background()
	e := testEnv{kind: "file", root: t.TempDir() + "/root", pub: "file://" + t.TempDir() + "/pub"}
	st, clk, dir, t0 := agedStream(t, e, "trades") // [1,31), then a row a minute below
	lg, err := logstore.Open(dir, logstore.Writer, logstore.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	base := t0.Add(5 * time.Hour)
	for i := range 180 { // [31,211): one row a minute from t0+5h
		if _, err := lg.Append(ctx, [][]byte{[]byte(`{}`)}, base.Add(time.Duration(i)*time.Minute).UnixMicro(), nil); err != nil {
			t.Fatal(err)
		}
	}
	lg.Close()
	if _, _, err := SetMaxAge(ctx, st, "10m"); err != nil {
		t.Fatal(err)
	}
	published := map[int64]time.Time{} // floor → when it was published
	for i := range 180 {
		now := base.Add(10*time.Minute + time.Duration(i)*time.Minute + 30*time.Second)
		clk.Set(now)
		r, err := Retain(ctx, st, RetainOptions{Clock: clk.Now, Grace: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(31 + i + 1); r.Floor != want {
			t.Fatalf("pass at +%dm: floor %d; want %d, the first row newer than 10m", i, r.Floor, want)
		}
		published[r.Floor] = now
		if r.Pending > 5 {
			t.Fatalf("pass %d: %d pending deletions; want at most 5 (one per quarter of the grace)", i, r.Pending)
		}
		m, err := st.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, pd := range m.Retention.PendingDeletions {
			if at, ok := published[pd.Below]; ok && time.UnixMicro(pd.NotBefore).Before(at.Add(time.Hour)) {
				t.Fatalf("deletion below %d due at %s, less than the grace after that floor was published at %s", pd.Below, time.UnixMicro(pd.NotBefore).UTC(), at)
			}
		}
	}
}

// BenchmarkRetainPass measures a steady retention pass, the one the
// retain role makes every maintain.retain_every: the window read afresh
// from the metadata, the floor checked on the log and not moved. "none"
// is a stream that never had a window; "live" passes the live log's
// handle, as the retain role does, instead of opening it each pass.
func BenchmarkRetainPass(b *testing.B) {
	for _, c := range []struct {
		name, age string
		live      bool
	}{{"none", "none", false}, {"2h", "2h", false}, {"2h-live", "2h", true}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			e := testEnv{kind: "file", root: b.TempDir() + "/root", pub: "file://" + b.TempDir() + "/pub"}
			st, clk, dir, _ := agedStream(b, e, "trades")
			if _, _, err := SetMaxAge(ctx, st, c.age); err != nil {
				b.Fatal(err)
			}
			opts := RetainOptions{Clock: clk.Now, Grace: time.Hour}
			if c.live {
				lg, err := logstore.Open(dir, logstore.Maintainer, logstore.WithClock(clk.Now))
				if err != nil {
					b.Fatal(err)
				}
				defer lg.Close()
				opts.Live = lg
			}
			if _, err := Retain(ctx, st, opts); err != nil { // the first pass moves the floor
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if r, err := Retain(ctx, st, opts); err != nil || r.Moved {
					b.Fatalf("steady pass: %+v, %v", r, err)
				}
			}
		})
	}
}

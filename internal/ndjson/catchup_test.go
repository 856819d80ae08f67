package ndjson

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/internal/waitfor"
	"github.com/streamcast/streamcast/pkg/broker"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/meta/history"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

const (
	cuSchemaV1 = `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":"string"}},"required":["id","sym"]}`
	cuSchemaV2 = `{"type":"object","properties":{"id":{"type":"integer"},"note":{"type":["string","null"]},"sym":{"type":"string"}},"required":["id","note","sym"]}`
)

// catchUpStream is a real broker serving stream "trades" from root, with
// max_replay rows of replay and max_backlog 16, and no maintenance
// children: the test publishes to the tables itself (publishTables).
type catchUpStream struct {
	root string
	url  string // ws://…/trades
	stop func()
}

// waitSubscribers polls the broker's /stats until the number of
// subscribers attached to "trades" satisfies ok: a subscription the server
// accepted and has not let go (a refused one never attaches).
func (s *catchUpStream) waitSubscribers(ctx context.Context, ok func(int64) bool) error {
	u, err := url.Parse(s.url)
	if err != nil {
		return err
	}
	u.Scheme, u.Path = "http", "/stats"
	var last int64 = -1
	for {
		if n, err := streamSubscribers(ctx, u.String(), "trades"); err == nil && ok(n) {
			return nil
		} else if err == nil {
			last = n
		}
		if !waitfor.Sleep(ctx, time.Millisecond) {
			return fmt.Errorf("%w; /stats last showed %d subscribers", ctx.Err(), last)
		}
	}
}

// streamSubscribers reads one stream's subscriber count from /stats.
func streamSubscribers(ctx context.Context, statsURL, stream string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, statsURL, nil)
	if err != nil {
		return 0, err
	}
	req.Close = true // no idle connection left behind for goleak to find
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st broker.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, fmt.Errorf("decode %s: %w", statsURL, err)
	}
	for _, s := range st.Streams {
		if s.Name == stream {
			return s.Subscribers, nil
		}
	}
	return 0, fmt.Errorf("%s lists no stream %q", statsURL, stream)
}

func serveCatchUp(t *testing.T, root, schemaJSON string, maxReplay int64) *catchUpStream {
	t.Helper()
	return serveCatchUpWith(t, root, schemaJSON, maxReplay, nil)
}

func serveCatchUpWith(t *testing.T, root, schemaJSON string, maxReplay int64, edit func(*config.Config)) *catchUpStream {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Root = root
	cfg.Maintain.Enabled = false
	cfg.Limits.MaxBacklog = 16
	st := config.DefaultStream("trades")
	st.Schema = config.RawJSON(schemaJSON)
	st.MaxReplay = &maxReplay
	cfg.Streams = []config.Stream{st}
	if edit != nil {
		edit(&cfg)
	}
	base, stop := brokertest.Run(t, cfg)
	return &catchUpStream{root: root, url: base + "/trades", stop: stop}
}

// publishRows publishes rows first..first+n-1 (id = i) in batches.
func (s *catchUpStream) publishRows(t *testing.T, first, n int, v2 bool) {
	t.Helper()
	if err := s.publish(ctxT(t), first, n, v2, 100); err != nil {
		t.Fatal(err)
	}
}

func (s *catchUpStream) publish(ctx context.Context, first, n int, v2 bool, batch int) error {
	return s.publishGated(ctx, first, n, v2, batch, nil)
}

// publishGated is publish calling gate (when not nil) with each batch's
// first id before sending it.
func (s *catchUpStream) publishGated(ctx context.Context, first, n int, v2 bool, batch int, gate func(first int) error) error {
	p, err := wire.Publish(ctx, s.url, wire.PublishOptions{})
	if err != nil {
		return err
	}
	defer p.Close()
	for i := first; i < first+n; i += batch {
		if gate != nil {
			if err := gate(i); err != nil {
				return err
			}
		}
		var rows [][]byte
		for j := i; j < min(i+batch, first+n); j++ {
			if v2 {
				rows = append(rows, fmt.Appendf(nil, `{"id":%d,"note":"n%d","sym":"S%d"}`, j, j, j%5))
			} else {
				rows = append(rows, fmt.Appendf(nil, `{"id":%d,"sym":"S%d"}`, j, j%5))
			}
		}
		if _, err := p.SendBatch(ctx, rows); err != nil {
			return err
		}
	}
	return nil
}

// lineCounter is a tail's output: the bytes, and how many lines were
// written so far, which another goroutine can wait on.
type lineCounter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines int64
	more  chan struct{} // closed and replaced on each write
}

func newLineCounter() *lineCounter { return &lineCounter{more: make(chan struct{})} }

func (c *lineCounter) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(b)
	c.lines += int64(bytes.Count(b, []byte{'\n'}))
	close(c.more)
	c.more = make(chan struct{})
	return len(b), nil
}

// waitLines waits until at least n lines were written.
func (c *lineCounter) waitLines(ctx context.Context, n int64) error {
	for {
		c.mu.Lock()
		lines, more := c.lines, c.more
		c.mu.Unlock()
		if lines >= n {
			return nil
		}
		select {
		case <-more:
		case <-ctx.Done():
			return fmt.Errorf("the tail printed %d lines, not the %d the next batch waits for: %w", lines, n, ctx.Err())
		}
	}
}

func (c *lineCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// publishTables seals and publishes every committed row of the current
// log, as the seal and publish roles do on a flush.
func publishTables(t *testing.T, root, log string) {
	t.Helper()
	lay, err := meta.NewLayout(root, "") // the log keeps its own published location
	if err != nil {
		t.Error(err)
		return
	}
	lg, err := logstore.Open(lay.LogDir("trades", log), logstore.Maintainer)
	if err != nil {
		t.Error(err)
		return
	}
	defer lg.Close()
	ctx := context.Background()
	if _, err := lg.Seal(ctx, true); err != nil {
		t.Error(err)
	}
	if _, err := lg.Publish(ctx, true); err != nil {
		t.Error(err)
	}
}

// uninterrupted is what a tail that never fell behind prints for
// [from, to): every row of every log, read with the server's own replay
// (logstore.Scan), framed as the server frames it.
func uninterrupted(t *testing.T, root string, from, to int64) string {
	t.Helper()
	lay, err := meta.NewLayout(root, "")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, name := range []string{"trades", "trades-v2"} {
		if _, err := os.Stat(lay.LogDir("trades", name)); err != nil {
			continue
		}
		lg, err := logstore.Open(lay.LogDir("trades", name), logstore.ReadOnly)
		if err != nil {
			t.Fatal(err)
		}
		earliest, end, err := lg.Extent(context.Background())
		if err == nil && max(from, earliest) < min(to, end) {
			err = lg.Scan(context.Background(), max(from, earliest), min(to, end), nil, func(o, ts int64, row []byte) error {
				b.Write(wire.AppendFrame(nil, o, ts, row))
				b.WriteByte('\n')
				return nil
			})
		}
		_ = lg.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// catchUpOpts are the options of `tail --catch-up` reading the tables
// through the greeting's metadata.
func catchUpOpts(o TailOptions) TailOptions {
	o = tailDefaults(o)
	o.CatchUpRounds = DefaultCatchUpRounds
	o.CatchUp = func(ctx context.Context, g *wire.Greeting, from int64, emit func(offset, ts int64, row []byte) error) (int64, error) {
		return history.CatchUp(ctx, history.CatchUpOptions{MetadataURI: g.MetadataHint, StreamID: g.StreamID, Where: o.Where}, from, emit)
	}
	return o
}

// diffFrames names the first line where got and want differ.
func diffFrames(t *testing.T, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			t.Fatalf("line %d differs (of %d got, %d want):\n got  %s\n want %s", i+1, len(g)-1, len(w)-1, g[i], w[i])
		}
	}
	t.Fatalf("got %d lines, want %d", len(g)-1, len(w)-1)
}

func catchUpRows() int {
	if os.Getenv("STREAMCAST_SOAK") == "full" {
		return 100_000
	}
	return 5_000
}

func TestCatchUpReadsTheGapFromTheTablesThenFollowsLiveWithNoGapOrDuplicate(t *testing.T) {
	root := t.TempDir()
	s := serveCatchUp(t, root, cuSchemaV1, 100)
	n := catchUpRows()
	s.publishRows(t, 1, n, false)
	publishTables(t, root, "trades")

	// Live publishing goes on while the tail catches up, and the tables
	// keep being published, as the maintenance roles would. The first
	// live rows (fewer than max_replay) go out while the first table read
	// runs, so the join may fall anywhere in them. The rest wait until the
	// tail's subscription is attached, as the server's /stats shows: a
	// publisher that went on at once could outrun a tail on a loaded
	// machine, its next subscription would be refused as too old, and
	// every row would come from the tables (CI saw "102000 rows from the
	// tables in 2 rounds, 0 from the socket"). Whatever the machine's
	// speed, the join is exercised.
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	const early = 50
	live := max(2000, n/50)
	out := newLineCounter() // the tail's output
	// The gate's wait ends with the test, so a tail that failed leaves no
	// publisher waiting for lines that will never come.
	gateCtx, stopGate := context.WithCancel(ctx)
	started, joined := make(chan struct{}), make(chan struct{})
	var startOnce, joinOnce sync.Once
	var wg sync.WaitGroup
	stopTables := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		select {
		case <-started:
		case <-stopTables:
			return
		}
		// Batches of 8: a batch is fanned out at once, and the
		// subscriber's queue holds 16 frames.
		if err := s.publish(ctx, n+1, early, false, 8); err != nil {
			t.Error(err)
			cancel()
			return
		}
		select {
		case <-joined:
		case <-stopTables:
			return
		}
		// The first round's throwaway connection has gone (the read
		// waited for it), so the one subscriber now is the tail's own,
		// which the server accepted: it follows live from here on.
		if err := s.waitSubscribers(ctx, func(n int64) bool { return n > 0 }); err != nil {
			t.Errorf("the tail did not attach to the live stream after reading the tables: %v", err)
			cancel()
			return
		}
		// Each batch waits until the tail has printed all but 48 of the
		// rows before it: a tail dropped for its full queue (4429) then
		// resumes inside the server's replay window of 100 rows, so the
		// live rows come from the socket however slow the machine (under
		// -race the tail fell behind the window in each of 3 rounds).
		if err := s.publishGated(ctx, n+1+early, live-early, false, 8, func(first int) error {
			return out.waitLines(gateCtx, int64(first-1-48))
		}); err != nil {
			select {
			case <-stopTables: // the tail ended first (it failed): no gate opens now
			default:
				t.Error(err)
				cancel()
			}
		}
	}()
	go func() {
		defer wg.Done()
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stopTables:
				return
			case <-tk.C:
				publishTables(t, root, "trades")
			}
		}
	}()
	defer func() { close(stopTables); stopGate(); wg.Wait() }()

	cursor := t.TempDir() + "/tail.cursor"
	c, _, err := OpenCursor(cursor)
	if err != nil {
		t.Fatal(err)
	}
	// --reconnect, as a user following live would run it: a 4429 drop
	// (the queue holds 16 frames) resumes where it left off.
	o := catchUpOpts(TailOptions{Offset: wire.At(1), Count: int64(n + live), Cursor: c, Reconnect: true})
	var fromTables, rounds int
	read := o.CatchUp
	o.CatchUp = func(ctx context.Context, g *wire.Greeting, from int64, emit func(offset, ts int64, row []byte) error) (int64, error) {
		rounds++
		// A round reads the greeting on a connection of its own and
		// closes it first; wait until the server has let it go, so a
		// subscriber counted after this read is the tail's.
		if err := s.waitSubscribers(ctx, func(n int64) bool { return n == 0 }); err != nil {
			return 0, fmt.Errorf("the round's greeting connection stayed attached: %w", err)
		}
		next, err := read(ctx, g, from, func(offset, ts int64, row []byte) error {
			fromTables++
			startOnce.Do(func() { close(started) })
			return emit(offset, ts, row)
		})
		joinOnce.Do(func() { close(joined) })
		return next, err
	}
	res, err := Tail(ctx, s.url, out, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rows from the tables in %d rounds, %d from the socket", fromTables, rounds, n+live-fromTables)
	if fromTables < n || fromTables >= n+live {
		t.Fatalf("%d rows came from the tables; want at least the %d published before the tail and some live ones from the socket", fromTables, n)
	}
	if res.Rows != int64(n+live) || res.First != 1 || res.Last != int64(n+live) {
		t.Fatalf("result %+v, want rows 1 to %d", res, n+live)
	}
	diffFrames(t, out.String(), uninterrupted(t, root, 1, int64(n+live+1)))
	b, err := os.ReadFile(cursor)
	if err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(n+live) {
		t.Fatalf("cursor file holds %q (%v), want %d", b, err, n+live)
	}
}

func TestCatchUpAcrossAMigrationSeam(t *testing.T) {
	root := t.TempDir()
	s := serveCatchUp(t, root, cuSchemaV1, 100_000)
	s.publishRows(t, 1, 300, false)
	s.stop()
	sch, err := schema.Compile([]byte(cuSchemaV2))
	if err != nil {
		t.Fatal(err)
	}
	lay, err := meta.NewLayout(root, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lifecycle.Migrate(context.Background(), lifecycle.Stream{Layout: lay, Name: "trades"},
		lifecycle.Declaration{Schema: sch, Log: logstore.Config{Stream: "trades", Published: lay.StoredPublished("trades", "")}}, lifecycle.Options{}); err != nil {
		t.Fatal(err)
	}
	s2 := serveCatchUp(t, root, cuSchemaV2, 100_000)
	s2.publishRows(t, 301, 200, true)

	// Below the seam the server answers 4416 evicted; the tail reads the
	// first log from its table and goes on in the second over the socket,
	// filtered alike on both sides.
	var out bytes.Buffer
	res, err := Tail(ctxT(t), s2.url, &out, catchUpOpts(TailOptions{Offset: wire.At(250), UntilCaughtUp: true}))
	if err != nil {
		t.Fatal(err)
	}
	if res.First != 250 || res.Last != 500 {
		t.Fatalf("result %+v, want rows 250 to 500", res)
	}
	diffFrames(t, out.String(), uninterrupted(t, root, 250, 501))

	// --offset earliest reads everything the tables hold first.
	out.Reset()
	if _, err := Tail(ctxT(t), s2.url, &out, catchUpOpts(TailOptions{Offset: wire.At(0), UntilCaughtUp: true})); err != nil {
		t.Fatal(err)
	}
	diffFrames(t, out.String(), uninterrupted(t, root, 1, 501))

	out.Reset()
	where := []byte(`{"sym":"S3"}`)
	if _, err := Tail(ctxT(t), s2.url, &out, catchUpOpts(TailOptions{Offset: wire.At(1), Where: where, Count: 100})); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, line := range strings.SplitAfter(uninterrupted(t, root, 1, 501), "\n") {
		if strings.Contains(line, `"sym":"S3"`) {
			want.WriteString(line)
		}
	}
	diffFrames(t, out.String(), want.String())
}

func TestCatchUpThatCannotConvergeNamesTheNumbersAndTheWaysOut(t *testing.T) {
	root := t.TempDir()
	s := serveCatchUp(t, root, cuSchemaV1, 10)
	s.publishRows(t, 1, 50, false)
	publishTables(t, root, "trades") // the tables end at 51
	s.publishRows(t, 51, 50, false)  // the server replays from 91 of 101

	var out bytes.Buffer
	o := catchUpOpts(TailOptions{Offset: wire.At(1)})
	o.CatchUpRounds = 2
	_, err := Tail(ctxT(t), s.url, &out, o)
	for _, want := range []string{"after 2 rounds", "the published tables end at offset 51", "max_replay=10", "frontier 101", "from offset 91",
		"Raise the stream's max_replay", "publish more often", "--catch-up-rounds"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v\nlacks %q", err, want)
		}
	}
	if got := strings.Count(out.String(), "\n"); got != 50 {
		t.Fatalf("printed %d rows before giving up, want the 50 the tables hold", got)
	}
}

func TestCatchUpFromAnS3PrefixReadsOnlyTheBucket(t *testing.T) {
	s3 := testkit.StartS3(t, nil)
	s3.UseCredentials(t)
	root := t.TempDir()
	s3cfg := warehouse.S3{Endpoint: s3.Endpoint(), Region: testkit.Region, PathStyle: true}
	s := serveCatchUpWith(t, root, cuSchemaV1, 100, func(c *config.Config) {
		c.Published = "s3://" + testkit.Bucket + "/tables"
		c.S3 = s3cfg
	})
	s.publishRows(t, 1, 2000, false)
	publishTables(t, root, "trades")

	o := catchUpOpts(TailOptions{Offset: wire.At(1), UntilCaughtUp: true})
	var uris []string
	o.CatchUp = func(ctx context.Context, g *wire.Greeting, from int64, emit func(offset, ts int64, row []byte) error) (int64, error) {
		uris = append(uris, g.MetadataHint)
		return history.CatchUp(ctx, history.CatchUpOptions{MetadataURI: g.MetadataHint, StreamID: g.StreamID, S3: s3cfg}, from, emit)
	}
	var out bytes.Buffer
	if _, err := Tail(ctxT(t), s.url, &out, o); err != nil {
		t.Fatal(err)
	}
	if len(uris) == 0 || !strings.HasPrefix(uris[0], "s3://"+testkit.Bucket+"/tables/trades/") {
		t.Fatalf("caught up through %v, want the bucket's metadata", uris)
	}
	diffFrames(t, out.String(), uninterrupted(t, root, 1, 2001))
}

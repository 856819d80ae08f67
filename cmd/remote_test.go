package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// Remote reads: sql and snapshot, through the real commands, with
// only the s3:// metadata URI on versitygw and the server's root gone.

const (
	remoteSchemaV1 = `{"type": "object", "properties": {"id": {"type": "integer"}, "sym": {"type": "string"}, "flag": {"type": "boolean"}}, "required": ["id", "sym", "flag"]}`
	remoteSchemaV2 = `{"type": "object", "properties": {"id": {"type": "integer"}, "sym": {"type": "string"}, "venue": {"type": ["string", "null"]}}, "required": ["id", "sym", "venue"]}`
	remoteV1Rows   = 2000 // offsets 1..2000 in log trades
	remoteV2Rows   = 1000 // offsets 2001..3000 in log trades-v2
)

// remoteStream is a stream published to versitygw by serve, migrate and
// retire, with the CLI configs that name it.
type remoteStream struct {
	dir      string // the test's working directory
	root     string // the server's root
	s3       *testkit.S3Server
	s3cfg    warehouse.S3
	metadata string // the stream's s3:// metadata URI
}

func (s *remoteStream) brokerConfig(schema string) config.Config {
	cfg := config.Default()
	cfg.Listen, cfg.Root, cfg.Maintain.Enabled = "127.0.0.1:0", s.root, false
	cfg.Published = "s3://" + testkit.Bucket + "/tables"
	cfg.S3 = s.s3cfg
	st := config.DefaultStream("trades")
	st.Schema = config.RawJSON(schema)
	cfg.Streams = []config.Stream{st}
	return cfg
}

// writeConfig writes a CLI config; with schema "" it holds only the S3
// endpoint, as on a machine that has the bucket and nothing else.
func (s *remoteStream) writeConfig(t *testing.T, name, schema string) string {
	t.Helper()
	y := fmt.Sprintf("s3:\n  endpoint: %s\n  region: %s\n  path_style: true\n", s.s3cfg.Endpoint, s.s3cfg.Region)
	if schema != "" {
		y += fmt.Sprintf("listen: 127.0.0.1:0\nroot: %s\npublished: s3://%s/tables\nmaintain: false\nstreams:\n  - name: trades\n    schema: %s\n", s.root, testkit.Bucket, schema)
	}
	p := filepath.Join(s.dir, name)
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// cli runs one streamcast command in-process and fails the test unless it
// exits 0.
func cli(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := cliRun(t, args...)
	if code != ExitOK {
		t.Fatalf("streamcast %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
	}
	return out
}

func cliRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv(configEnv, "")
	var out, errOut bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func publishRemote(t *testing.T, url string, first, n int, v2 bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := wire.Publish(ctx, url, wire.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := first; i < first+n; i += 100 {
		var rows [][]byte
		for j := i; j < min(i+100, first+n); j++ {
			if v2 {
				venue := "null"
				if j%3 == 0 {
					venue = fmt.Sprintf("%q", fmt.Sprintf("V%d", j%2))
				}
				rows = append(rows, fmt.Appendf(nil, `{"id":%d,"sym":"S%d","venue":%s}`, j, j%5, venue))
			} else {
				rows = append(rows, fmt.Appendf(nil, `{"id":%d,"sym":"S%d","flag":%v}`, j, j%5, j%2 == 0))
			}
		}
		if _, err := p.SendBatch(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
}

// newRemoteStream serves log trades (v1), migrates it, serves trades-v2, and
// publishes both to the bucket. It returns the stream and what tail printed
// live across both logs. follow, when not nil, runs while trades-v2 is
// served and its rows are not yet published, with the broker's URL.
func newRemoteStream(t *testing.T, follow func(s *remoteStream, url string)) (*remoteStream, string) {
	t.Helper()
	srv := testkit.StartS3(t, nil)
	srv.UseCredentials(t)
	dir := t.TempDir()
	t.Chdir(dir)
	s := &remoteStream{
		dir: dir, root: filepath.Join(dir, "data"), s3: srv,
		s3cfg:    warehouse.S3{Endpoint: srv.Endpoint(), Region: testkit.Region, PathStyle: true},
		metadata: "s3://" + testkit.Bucket + "/tables/trades/trades.metadata.json",
	}
	v2 := s.writeConfig(t, "v2.yaml", remoteSchemaV2)

	base, stop := brokertest.Run(t, s.brokerConfig(remoteSchemaV1))
	publishRemote(t, base+"/trades", 1, remoteV1Rows, false)
	live := cli(t, "tail", "--offset", "earliest", "--until-caught-up", base+"/trades")
	stop()

	cli(t, "migrate", "--config", v2, "trades")
	base, stop = brokertest.Run(t, s.brokerConfig(remoteSchemaV2))
	publishRemote(t, base+"/trades", remoteV1Rows+1, remoteV2Rows, true)
	live += cli(t, "tail", "--offset", fmt.Sprint(remoteV1Rows+1), "--until-caught-up", base+"/trades")
	if follow != nil {
		follow(s, base+"/trades")
	}
	stop()
	// Retiring publishes every row to the bucket.
	cli(t, "retire", "--config", v2, "trades")
	return s, live
}

// removeRoot takes the server's root away for the rest of the test, so only
// the bucket is left to read.
func (s *remoteStream) removeRoot(t *testing.T) {
	t.Helper()
	if err := os.Rename(s.root, s.root+".gone"); err != nil {
		t.Fatal(err)
	}
}

func TestSQLAndSnapshotWithOnlyTheS3MetadataURI(t *testing.T) {
	s, live := newRemoteStream(t, nil)
	v2 := filepath.Join(s.dir, "v2.yaml")
	queries := []struct {
		name string
		args []string
	}{
		{"group by", []string{"--format", "csv", "SELECT sym, count(*) AS n, sum(id) AS s FROM log GROUP BY sym ORDER BY sym"}},
		{"filter that prunes", []string{"--filter", "streamcast_offset >= 2990", "--filter", "sym in (S0, S1)", "SELECT streamcast_offset AS o, id, sym FROM log ORDER BY o"}},
		{"union across the seam", []string{"SELECT streamcast_offset AS o, flag, venue FROM log WHERE streamcast_offset BETWEEN 1995 AND 2006 ORDER BY o"}},
		{"union counts", []string{"SELECT count(flag) AS flags, count(venue) AS venues, count(*) AS n FROM log"}},
	}
	local := make([]string, len(queries))
	for i, q := range queries {
		local[i] = cli(t, append([]string{"sql", "--config", v2, "trades"}, q.args...)...)
	}
	// A time inside the first log: the ts of offset 1000, read from the root.
	ts := strings.TrimSpace(cli(t, "sql", "--config", v2, "--format", "csv", "trades", "SELECT streamcast_ts FROM log WHERE streamcast_offset = 1000"))
	ts = strings.TrimPrefix(ts, "streamcast_ts\n")
	asOfTS := cli(t, "sql", "--config", v2, "--as-of-ts", ts, "trades", "SELECT count(*) AS n, max(streamcast_offset) AS hi FROM log")
	localFrames := cli(t, "snapshot", "--config", v2, "trades", "--format", "frames")
	if localFrames != live {
		t.Fatalf("the local snapshot differs from what tail printed live (%d and %d bytes)", len(localFrames), len(live))
	}

	s.removeRoot(t)
	bucketOnly := s.writeConfig(t, "s3.yaml", "")
	for i, q := range queries {
		got := cli(t, append([]string{"sql", "--config", bucketOnly, "--metadata", s.metadata}, q.args...)...)
		if got != local[i] {
			t.Errorf("%s over s3:\n%s\nfrom the root:\n%s", q.name, got, local[i])
		}
	}
	// The filter on offsets skips the whole first log in the bucket.
	code, _, errOut := cliRun(t, "sql", "--config", bucketOnly, "--log-level", "debug", "--log-format", "json", "--metadata", s.metadata, "--filter", "streamcast_offset >= 2990", "SELECT count(*) FROM log")
	if code != ExitOK || !strings.Contains(errOut, `"logs_skipped":1`) {
		t.Errorf("--filter 'streamcast_offset >= 2990' over s3 skipped no log: exit %d\n%s", code, errOut)
	}
	// A filter on an ordinary column skips what its statistics rule out
	// (the first log, whose ids stop at 2000): one file is opened, and the
	// answer stays exact.
	code, out, errOut := cliRun(t, "sql", "--config", bucketOnly, "--log-level", "debug", "--log-format", "json", "--metadata", s.metadata, "--filter", "id >= 2990", "SELECT count(*) AS n FROM log")
	if code != ExitOK || out != "{\"n\":11}\n" || !strings.Contains(errOut, `"files_opened":1,`) {
		t.Errorf("--filter 'id >= 2990' over s3: exit %d, stdout %q\n%s", code, out, errOut)
	}
	if got := cli(t, "sql", "--config", bucketOnly, "--metadata", s.metadata, "--as-of-ts", ts, "SELECT count(*) AS n, max(streamcast_offset) AS hi FROM log"); got != asOfTS {
		t.Errorf("--as-of-ts %s over s3: %s, from the root: %s", ts, got, asOfTS)
	}
	// Sanity of the answers themselves, so equal-but-empty cannot pass.
	if !strings.Contains(local[3], `"n":3000`) || asOfTS == "" || !strings.Contains(asOfTS, `"hi":1000`) {
		t.Errorf("root answers look wrong: %q, %q", local[3], asOfTS)
	}

	// Refusals name the numbers over s3 as well.
	code, out, errOut = cliRun(t, "sql", "--config", bucketOnly, "--metadata", s.metadata, "--as-of-offset", "5000", "SELECT count(*) FROM log")
	if code != ExitFailure || out != "" || !strings.Contains(errOut, "offset 5000 was never written; give --as-of-offset 3000 or earlier") {
		t.Errorf("--as-of-offset 5000 over s3: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// snapshot --format frames: byte-identical to the live tail.
	if got := cli(t, "snapshot", "trades", "--config", bucketOnly, "--metadata", s.metadata, "--format", "frames"); got != live {
		t.Errorf("snapshot frames over s3 differ from tail's (%d and %d bytes)", len(got), len(live))
	}
	// --format parquet -o FILE reads back as the same rows.
	pq := filepath.Join(s.dir, "out.parquet")
	cli(t, "snapshot", "trades", "--config", bucketOnly, "--metadata", s.metadata, "--format", "parquet", "-o", pq)
	checkSnapshotParquet(t, pq, local[3])
}

// checkSnapshotParquet reads a snapshot's Parquet file back and checks it
// holds offsets 1 to 3000 once each, with as many flag and venue values as
// counts says the history has ({"flags":F,"venues":V,"n":N}).
func checkSnapshotParquet(t *testing.T, path, counts string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rf, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatalf("read %s back: %v", path, err)
	}
	fr, err := pqarrow.NewFileReader(rf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	col := func(name string) *arrow.Chunked {
		idx := tbl.Schema().FieldIndices(name)
		if len(idx) != 1 {
			t.Fatalf("%s has no column %s: %s", path, name, tbl.Schema())
		}
		return tbl.Column(idx[0]).Data()
	}
	var sum int64
	seen := make(map[int64]bool)
	for _, c := range col("streamcast_offset").Chunks() {
		for _, o := range c.(*array.Int64).Int64Values() {
			seen[o], sum = true, sum+o
		}
	}
	n := int64(remoteV1Rows + remoteV2Rows)
	if tbl.NumRows() != n || int64(len(seen)) != n || sum != n*(n+1)/2 {
		t.Errorf("%s: %d rows, %d distinct offsets summing to %d; want offsets 1 to %d once each", path, tbl.NumRows(), len(seen), sum, n)
	}
	flags, venues := col("flag"), col("venue")
	got := fmt.Sprintf(`{"flags":%d,"venues":%d,"n":%d}`, int64(flags.Len()-flags.NullN()), int64(venues.Len()-venues.NullN()), tbl.NumRows())
	if got != strings.TrimSpace(counts) {
		t.Errorf("%s holds %s, the history says %s", path, got, counts)
	}
}

// lockedBuffer is a bytes.Buffer that the follow goroutine writes while the
// test reads it.
type lockedBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{} // signalled (without blocking) on every write
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.wrote != nil {
		select {
		case b.wrote <- struct{}{}:
		default:
		}
	}
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestSQLFollowOverS3AndTheBrokerConvergesOnTheOneShotAnswer(t *testing.T) {
	const query = "SELECT count(*) AS n, sum(id) AS s, count(venue) AS v FROM log"
	var followed string
	s, _ := newRemoteStream(t, func(s *remoteStream, url string) {
		// trades-v2 is served and unpublished: only log trades is in the
		// bucket, the rest comes from the broker.
		cfg := s.writeConfig(t, "follow.yaml", "")
		// A time past what the bucket holds is refused, never answered
		// short: trades-v2's rows are not published yet.
		code, out, errOut := cliRun(t, "sql", "--config", cfg, "--metadata", s.metadata, "--as-of-ts", "2100-01-01T00:00:00Z", "SELECT count(*) FROM log")
		if code != ExitFailure || out != "" || !strings.Contains(errOut, "is later than what is published") || !strings.Contains(errOut, "offsets below 2001") {
			t.Errorf("--as-of-ts past the published end over s3: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		ctx, cancel := context.WithCancel(context.Background())
		fout, ferr := &lockedBuffer{wrote: make(chan struct{}, 1)}, &lockedBuffer{}
		done := make(chan int, 1)
		go func() {
			done <- Run(ctx, []string{"sql", "--config", cfg, "--metadata", s.metadata, "--broker", url, "--follow", "100ms", query}, strings.NewReader(""), fout, ferr)
		}()
		const want = remoteV1Rows + remoteV2Rows + 1 // the end of trades-v2
		deadline := time.After(30 * time.Second)
		var err error
		var ok bool
	wait:
		for followed, ok = refreshAt(fout.String(), want); !ok; followed, ok = refreshAt(fout.String(), want) {
			select {
			case <-fout.wrote:
			case code := <-done:
				done <- code
				err = fmt.Errorf("sql --follow exited %d", code)
				break wait
			case <-deadline:
				err = fmt.Errorf("not after 30s")
				break wait
			}
		}
		cancel()
		code = <-done
		if err != nil {
			t.Fatalf("--follow never refreshed at end_offset %d: %v (exit %d)\nstdout:\n%s\nstderr:\n%s", want, err, code, fout.String(), ferr.String())
		}
	})
	s.removeRoot(t)
	oneShot := cli(t, "sql", "--config", s.writeConfig(t, "s3.yaml", ""), "--metadata", s.metadata, query)
	if followed != strings.TrimSpace(oneShot) || !strings.Contains(followed, `"n":3000,`) {
		t.Errorf("--follow settled on %s, the one-shot read over s3 after retirement says %s", followed, oneShot)
	}
}

// refreshAt finds, in sql --follow's NDJSON, the first complete refresh at
// end_offset end and returns its one result row.
func refreshAt(out string, end int64) (string, bool) {
	for line := range strings.Lines(out) {
		if !strings.HasSuffix(line, "\n") {
			break // still being written
		}
		var r struct {
			EndOffset int64             `json:"end_offset"`
			Rows      []json.RawMessage `json:"rows"`
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.EndOffset == end && len(r.Rows) == 1 {
			return string(r.Rows[0]), true
		}
	}
	return "", false
}

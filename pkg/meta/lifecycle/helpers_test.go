//go:build linux

package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/hadoop"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
	"github.com/streamcast/streamcast/pkg/schema"
)

// The schemas the tests migrate between.
const (
	schemaV1 = `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":"string"}},"required":["id","sym"]}`
	// v2 adds a nullable column.
	schemaV2 = `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":"string"},"note":{"type":["string","null"]}},"required":["id","sym","note"]}`
)

const stream = "trades"

// The child process: the test binary runs Migrate or Retire instead of
// the tests when childEnv is set, and SIGKILLs itself right after the step
// killAtEnv names, as a crash there would stop it.
const (
	childEnv  = "LIFECYCLE_TEST_CHILD" // migrate | retire
	rootEnv   = "LIFECYCLE_TEST_ROOT"
	schemaEnv = "LIFECYCLE_TEST_SCHEMA"
	killAtEnv = "LIFECYCLE_TEST_KILL_AT"
	pubEnv    = "LIFECYCLE_TEST_PUBLISHED" // the published prefix; "" for <root>/published
)

func TestMain(m *testing.M) {
	if op := os.Getenv(childEnv); op == "ingest" {
		os.Exit(runIngestChild())
	} else if op == "ingest-large" {
		os.Exit(runLargeChild())
	} else if op != "" {
		os.Exit(runChild(op))
	}
	testkit.RelaxGC() // the tests, not the helper children above
	os.Exit(m.Run())
}

func runChild(op string) int {
	lay, err := meta.NewLayout(os.Getenv(rootEnv), os.Getenv(pubEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s := lifecycle.Stream{Layout: lay, Name: stream}
	killAt := os.Getenv(killAtEnv)
	o := lifecycle.Options{AfterStep: func(step string) {
		if step == killAt {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}}
	ctx := context.Background()
	switch op {
	case "migrate":
		sch, err := schema.Compile([]byte(os.Getenv(schemaEnv)))
		if err == nil {
			_, err = lifecycle.Migrate(ctx, s, lifecycle.Declaration{Schema: sch}, o)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	case "retire":
		if _, err := lifecycle.Retire(ctx, s, o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	case "restore":
		if _, err := lifecycle.Restore(ctx, s, lifecycle.RestoreOptions{Options: o}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// killedAt runs op in a child process that kills itself after step, and
// checks that it died of SIGKILL (the step was reached).
func killedAt(t *testing.T, f *fixture, op, step, schemaJSON string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+op, rootEnv+"="+f.root, pubEnv+"="+f.pub, schemaEnv+"="+schemaJSON, killAtEnv+"="+step)
	out, err := cmd.CombinedOutput()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("%s killed after step %s: the child did not die of SIGKILL (%v):\n%s", op, step, err, out)
	}
}

// fixture is a stream with one log of schemaV1 holding rows of an
// exactly-once publisher "p" (row i has seq i+1), and its first metadata.
type fixture struct {
	root  string
	pub   string // the configured published prefix; "" for <root>/published
	s3    *testkit.S3Server
	lay   meta.Layout
	s3cfg warehouse.S3
	dest  replica.Destination // where the log's replica goes (replicate.destination)
}

func (f *fixture) stream() lifecycle.Stream {
	return lifecycle.Stream{Layout: f.lay, S3: f.s3cfg, Name: stream}
}

func (f *fixture) store(t *testing.T) *meta.Store {
	t.Helper()
	st, err := meta.NewStore(context.Background(), f.lay, stream, f.s3cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// newFixture makes the stream with rows rows, as serve would have: its
// first log and metadata, publishing under the default <root>/published
// (kind "default"), a file:// prefix outside the root ("file") or an
// s3:// one on versitygw ("s3"). "file" and "s3" replicate to a
// destination of their own beside the prefix; "beside" is "file" with
// no destination, the replica going beside the tables.
func newFixture(t *testing.T, kind string, rows int) *fixture {
	t.Helper()
	f := &fixture{root: t.TempDir()}
	if kind == "file" || kind == "beside" {
		elsewhere := t.TempDir() // beside the root, as a lost root leaves it
		f.pub = "file://" + filepath.Join(elsewhere, "pub")
		if kind == "file" {
			f.dest.Location = warehouse.Location{Dir: filepath.Join(elsewhere, "replica")}
		}
	}
	if kind == "s3" {
		f.s3 = testkit.StartS3(t, nil)
		f.s3.UseCredentials(t)
		f.pub = "s3://" + testkit.Bucket + "/tables"
		f.s3cfg = warehouse.S3{Endpoint: f.s3.Endpoint(), Region: testkit.Region, PathStyle: true}
		f.dest = replica.Destination{Location: warehouse.Location{S3: "s3://" + testkit.Bucket + "/replica"}, S3: f.s3cfg}
	}
	lay, err := meta.NewLayout(f.root, f.pub)
	if err != nil {
		t.Fatal(err)
	}
	f.lay = lay
	sch := mustSchema(t, schemaV1)
	if err := os.MkdirAll(lay.StreamDir(stream), 0o755); err != nil {
		t.Fatal(err)
	}
	lg, err := logstore.Create(lay.LogDir(stream, stream), sch, f.logConfig(stream, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	appendRows(t, lg, 0, rows, false)
	md, err := meta.New(stream)
	if err != nil {
		t.Fatal(err)
	}
	d, err := meta.DescribeLog(lg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := md.AddLog(d, sch); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store(t).Commit(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	return f
}

// logConfig is the settings serve would store in the stream's log named
// log.
func (f *fixture) logConfig(log string, sortBy []string) logstore.Config {
	c := logstore.Config{Stream: stream, Log: log, SortBy: sortBy, Published: f.lay.StoredPublished(stream, log)}
	if f.s3 != nil {
		c.S3 = f.s3cfg
	}
	return c
}

// serveConfig is a config serve runs the fixture's stream with (declared
// with schemaJSON), with no maintenance children.
func (f *fixture) serveConfig(schemaJSON string) config.Config {
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Root = f.root
	cfg.Published = f.pub
	cfg.S3 = f.s3cfg
	st := config.DefaultStream(stream)
	st.Schema = config.RawJSON(schemaJSON)
	st.ExactlyOnce = true
	st.MaxReplay = nil
	cfg.Streams = []config.Stream{st}
	cfg.Maintain.Enabled = false
	return cfg
}

// row is row i in the canonical form of schemaV1 (v2 false) or schemaV2.
func row(i int, v2 bool) []byte {
	if v2 {
		return fmt.Appendf(nil, `{"id":%d,"sym":"S%d","note":null}`, i, i%7)
	}
	return fmt.Appendf(nil, `{"id":%d,"sym":"S%d"}`, i, i%7)
}

// appendRows appends rows first..first+n-1 in batches of 5, as publisher
// p's rows seq first+1.., so p's mark after them is seq first+n at the
// last row's offset.
func appendRows(t *testing.T, lg *logstore.Log, first, n int, v2 bool) {
	t.Helper()
	ctx := context.Background()
	_, end, err := lg.Extent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := first; i < first+n; i += 5 {
		k := min(5, first+n-i)
		var rows [][]byte
		for j := range k {
			rows = append(rows, row(i+j, v2))
		}
		mark := logstore.Mark{Publisher: "p", LastSeq: int64(i + k), LastOffset: end + int64(k) - 1}
		got, err := lg.Append(ctx, rows, 1700000000000000+int64(i), []logstore.Mark{mark})
		if err != nil {
			t.Fatal(err)
		}
		if got != end {
			t.Fatalf("append at %d, want %d", got, end)
		}
		end += int64(k)
	}
}

func benchSchema(b *testing.B, doc string) *schema.Schema {
	b.Helper()
	sch, err := schema.Compile([]byte(doc))
	if err != nil {
		b.Fatal(err)
	}
	return sch
}

func mustSchema(t *testing.T, doc string) *schema.Schema {
	t.Helper()
	sch, err := schema.Compile([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// migrate runs Migrate to schemaJSON in this process.
func (f *fixture) migrate(t *testing.T, schemaJSON string) (*lifecycle.Migration, error) {
	t.Helper()
	return lifecycle.Migrate(context.Background(), f.stream(), lifecycle.Declaration{Schema: mustSchema(t, schemaJSON), Log: f.logConfig("", nil)}, lifecycle.Options{})
}

func (f *fixture) load(t *testing.T) *meta.Metadata {
	t.Helper()
	m, err := f.store(t).Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fixture) loadPublished(t *testing.T) *meta.Metadata {
	t.Helper()
	m, err := f.store(t).LoadPublished(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fixture) open(t *testing.T, log string) *logstore.Log {
	t.Helper()
	lg, err := logstore.Open(f.lay.LogDir(stream, log), logstore.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lg.Close() })
	return lg
}

// publishedOffsets reads the published table of log with iceberg-go's own
// hadoop catalog, as any reader would, and returns its offsets in table
// order, failing on a duplicate.
func (f *fixture) publishedOffsets(t *testing.T, log string) map[int64]bool {
	t.Helper()
	ctx := context.Background()
	wh := "file://" + f.lay.Published().Dir
	var props iceberg.Properties
	if f.s3 != nil {
		wh = f.pub
		props = iceberg.Properties{
			"allow-unsafe-commits":             "true",
			icebergio.S3EndpointURL:            f.s3.Endpoint(),
			icebergio.S3Region:                 testkit.Region,
			icebergio.S3ForceVirtualAddressing: "false",
		}
	}
	cat, err := hadoop.NewCatalog("test", wh, props)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(ctx, table.Identifier{stream, log})
	if err != nil {
		t.Fatalf("load the table %s.%s under %s: %v", stream, log, wh, err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]bool{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		offs := rec.Column(rec.Schema().FieldIndices(logstore.OffsetColumn)[0]).(*array.Int64)
		for i := range offs.Len() {
			if got[offs.Value(i)] {
				t.Fatalf("the table %s holds offset %d twice", log, offs.Value(i))
			}
			got[offs.Value(i)] = true
		}
		rec.Release()
	}
	return got
}

// parquetOffsets reads every local Parquet file of the log in dir and
// returns the offsets they hold, failing on a duplicate.
func parquetOffsets(t *testing.T, dir string) map[int64]bool {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, logstore.FilesDir, "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]bool{}
	for _, name := range names {
		rdr, err := file.OpenParquetFile(name, false)
		if err != nil {
			t.Fatal(err)
		}
		ar, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := ar.ReadTable(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		col := tbl.Column(tbl.Schema().FieldIndices(logstore.OffsetColumn)[0])
		for _, chunk := range col.Data().Chunks() {
			offs := chunk.(*array.Int64)
			for i := range offs.Len() {
				if got[offs.Value(i)] {
					t.Fatalf("the local files hold offset %d twice", offs.Value(i))
				}
				got[offs.Value(i)] = true
			}
		}
		tbl.Release()
		_ = rdr.Close()
	}
	return got
}

// dense checks that set holds exactly the offsets [from, to).
func dense(t *testing.T, what string, set map[int64]bool, from, to int64) {
	t.Helper()
	if int64(len(set)) != to-from {
		t.Errorf("%s holds %d offsets, want [%d,%d)", what, len(set), from, to)
	}
	for off := from; off < to; off++ {
		if !set[off] {
			t.Fatalf("%s lacks offset %d of [%d,%d)", what, off, from, to)
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

package history_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/history"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
	"github.com/streamcast/streamcast/pkg/schema"
)

const stream = "trades"

// The three schemas a stream migrates through: v2 adds note, removes px
// and makes sym nullable; v3 brings px back (same type) and drops note,
// and sym is required again.
const (
	schemaV1 = `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":"string"},"px":{"type":"number"}},"required":["id","sym","px"]}`
	schemaV2 = `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":["string","null"]},"note":{"type":["string","null"]}},"required":["id","sym","note"]}`
	schemaV3 = `{"type":"object","properties":{"id":{"type":"integer"},"px":{"type":"number"},"sym":{"type":"string"}},"required":["id","px","sym"]}`
)

// baseTS is the stamp base: a batch is stamped baseTS + its first offset
// (offsets start at 1).
const baseTS = int64(1_700_000_000_000_000)

// fixture is a stream under a local root (and optionally an s3:// prefix
// on versitygw), built as serve and migrate would build it.
type fixture struct {
	root  string
	pub   string
	lay   meta.Layout
	s3    *testkit.S3Server
	s3cfg warehouse.S3
	sch   []string // the schema of each log, oldest first
}

func newFixture(t testing.TB, onS3 bool) *fixture {
	t.Helper()
	f := &fixture{root: t.TempDir()}
	if onS3 {
		f.s3 = testkit.StartS3(t, nil)
		f.s3.UseCredentials(t)
		f.pub = "s3://" + testkit.Bucket + "/tables"
		f.s3cfg = warehouse.S3{Endpoint: f.s3.Endpoint(), Region: testkit.Region, PathStyle: true}
	}
	lay, err := meta.NewLayout(f.root, f.pub)
	if err != nil {
		t.Fatal(err)
	}
	f.lay = lay
	return f
}

func (f *fixture) logConfig(log string) logstore.Config {
	c := logstore.Config{Stream: stream, Log: log, Published: f.lay.StoredPublished(stream, log)}
	if f.s3 != nil {
		c.S3 = f.s3cfg
	}
	return c
}

func (f *fixture) store(t *testing.T) *meta.Store {
	t.Helper()
	st, err := meta.NewStore(context.Background(), f.lay, stream, f.s3cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func compile(t testing.TB, doc string) *schema.Schema {
	t.Helper()
	s, err := schema.Compile([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// create makes the stream's first log with schema doc and its metadata.
func (f *fixture) create(t *testing.T, doc string) {
	t.Helper()
	if err := os.MkdirAll(f.lay.StreamDir(stream), 0o755); err != nil {
		t.Fatal(err)
	}
	sch := compile(t, doc)
	lg, err := logstore.Create(f.lay.LogDir(stream, stream), sch, f.logConfig(stream))
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
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
	f.sch = append(f.sch, doc)
}

// current is the name of the stream's current log.
func (f *fixture) current(t *testing.T) string {
	t.Helper()
	md, err := f.store(t).Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return md.Current().Name
}

// rowFor is row o of a log of schema doc in canonical form.
func rowFor(doc string, o int64) []byte {
	switch doc {
	case schemaV1:
		return fmt.Appendf(nil, `{"id":%d,"sym":"S%d","px":%d.5}`, o, o%7, o)
	case schemaV2:
		if o%3 == 0 {
			return fmt.Appendf(nil, `{"id":%d,"sym":null,"note":"n%d"}`, o, o)
		}
		return fmt.Appendf(nil, `{"id":%d,"sym":"S%d","note":null}`, o, o%7)
	}
	return fmt.Appendf(nil, `{"id":%d,"px":%d.25,"sym":"S%d"}`, o, o, o%7)
}

// append appends n rows to the current log, in batches of 10, each batch
// stamped baseTS + its first offset, and publishes them when publish.
func (f *fixture) append(t *testing.T, n int, publish bool) {
	t.Helper()
	ctx := context.Background()
	lg, err := logstore.Open(f.lay.LogDir(stream, f.current(t)), logstore.Writer)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	doc := f.sch[len(f.sch)-1]
	_, end, err := lg.Extent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 10 {
		k := min(10, n-i)
		var rows [][]byte
		for j := range k {
			rows = append(rows, rowFor(doc, end+int64(j)))
		}
		if _, err := lg.Append(ctx, rows, baseTS+end, nil); err != nil {
			t.Fatal(err)
		}
		end += int64(k)
	}
	if publish {
		if _, err := lg.PublishAll(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// migrate migrates the stream to schema doc.
func (f *fixture) migrate(t *testing.T, doc string) {
	t.Helper()
	_, err := lifecycle.Migrate(context.Background(), lifecycle.Stream{Layout: f.lay, S3: f.s3cfg, Name: stream},
		lifecycle.Declaration{Schema: compile(t, doc), Log: f.logConfig("")}, lifecycle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.sch = append(f.sch, doc)
}

// open opens a Reader of the fixture's stream by its root.
func (f *fixture) open(t *testing.T, opts history.Options) *history.Reader {
	t.Helper()
	r, err := f.tryOpen(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func (f *fixture) tryOpen(opts history.Options) (*history.Reader, error) {
	if opts.MetadataURI == "" {
		opts.Root, opts.Published, opts.Stream = f.root, f.pub, stream
	}
	opts.S3 = f.s3cfg
	return history.Open(context.Background(), opts)
}

// bruteForce replays every log of the stream row by row (logstore.Scan,
// the server's own replay) and returns the rows in [from, to) as maps
// over the union of columns: a column a log lacks is null.
func (f *fixture) bruteForce(t *testing.T, from, to int64, keep func(offset, ts int64) bool) []map[string]any {
	t.Helper()
	ctx := context.Background()
	md, err := f.store(t).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cols := map[string]bool{}
	for _, l := range md.Logs {
		for _, c := range compile(t, string(l.Schema)).Arrow().Fields() {
			cols[c.Name] = true
		}
	}
	var out []map[string]any
	for _, l := range md.Logs {
		lg, err := logstore.Open(f.lay.LogDir(stream, l.Name), logstore.ReadOnly)
		if err != nil {
			t.Fatal(err)
		}
		earliest, end, err := lg.Extent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := max(from, earliest), min(to, end)
		if lo < hi {
			err = lg.Scan(ctx, lo, hi, nil, func(offset, ts int64, row []byte) error {
				if keep != nil && !keep(offset, ts) {
					return nil
				}
				m := map[string]any{}
				if err := json.Unmarshal(row, &m); err != nil {
					return err
				}
				for c := range cols {
					if _, ok := m[c]; !ok {
						m[c] = nil
					}
				}
				m[logstore.OffsetColumn] = float64(offset)
				m[logstore.TSColumn] = float64(ts)
				out = append(out, m)
				return nil
			})
		}
		_ = lg.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// scanAll reads every row a Scan returns as maps.
func scanAll(t *testing.T, r *history.Reader, req history.ScanRequest) []map[string]any {
	t.Helper()
	rr, err := r.Scan(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	var out []map[string]any
	for rr.Next() {
		rec := rr.RecordBatch()
		for i := range int(rec.NumRows()) {
			m := map[string]any{}
			for j, fld := range rec.Schema().Fields() {
				m[fld.Name] = rec.Column(j).GetOneForMarshal(i)
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			var back map[string]any
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			out = append(out, back)
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameRows fails unless got and want hold the same rows in the same
// order, naming the first difference.
func sameRows(t *testing.T, got, want []map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("row %d:\n got  %v\n want %v", i, got[i], want[i])
		}
	}
}

//go:build linux

package lifecycle_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
	"github.com/streamcast/streamcast/pkg/schema/source"
	"github.com/streamcast/streamcast/pkg/wire"
)

// srcArrowSchema is schemaV1's columns as a foreign file has them: other
// order, narrower integer, large strings (all cast without loss).
var srcArrowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "sym", Type: arrow.BinaryTypes.LargeString},
	{Name: "id", Type: arrow.PrimitiveTypes.Int32},
}, nil)

// sourceRecord builds rows [from, to) (row(i, false)) as an Arrow record.
func sourceRecord(from, to int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, srcArrowSchema)
	defer b.Release()
	for i := from; i < to; i++ {
		b.Field(0).(*array.LargeStringBuilder).Append(fmt.Sprintf("S%d", i%7))
		b.Field(1).(*array.Int32Builder).Append(int32(i))
	}
	return b.NewRecordBatch()
}

// writeSource writes rows [from, to) in format f into dir and returns its
// path.
func writeSource(t testing.TB, dir string, f source.Format, from, to int) string {
	t.Helper()
	ext := map[source.Format]string{source.Parquet: "parquet", source.ArrowFile: "arrow", source.ArrowStream: "arrows", source.NDJSON: "ndjson", source.CSV: "csv"}[f]
	path := filepath.Join(dir, fmt.Sprintf("rows-%d-%d.%s", from, to, ext))
	var buf bytes.Buffer
	switch f {
	case source.NDJSON:
		for i := from; i < to; i++ {
			buf.Write(row(i, false))
			buf.WriteByte('\n')
		}
	case source.CSV:
		buf.WriteString("sym,id\n")
		for i := from; i < to; i++ {
			fmt.Fprintf(&buf, "S%d,%d\n", i%7, i)
		}
	default:
		// Batches of 1000 rows, so a source has several.
		var recs []arrow.RecordBatch
		for i := from; i < to; i += 1000 {
			recs = append(recs, sourceRecord(i, min(to, i+1000)))
		}
		defer func() {
			for _, r := range recs {
				r.Release()
			}
		}()
		switch f {
		case source.Parquet:
			w, err := pqarrow.NewFileWriter(srcArrowSchema, &buf, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if err := w.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		case source.ArrowStream:
			w := ipc.NewWriter(&buf, ipc.WithSchema(srcArrowSchema))
			for _, r := range recs {
				if err := w.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			w.Close()
		case source.ArrowFile:
			fh, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			w, err := ipc.NewFileWriter(fh, ipc.WithSchema(srcArrowSchema))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if err := w.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			fh.Close()
			return path
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func (f *fixture) ingest(inputs []source.Input, o lifecycle.IngestOptions) (*lifecycle.Ingested, error) {
	o.Inputs = inputs
	return lifecycle.Ingest(context.Background(), f.stream(), o)
}

// scanRows returns the log's rows [from, to) as offset → canonical JSON.
func scanRows(t *testing.T, lg *logstore.Log, from, to int64) []string {
	t.Helper()
	var out []string
	next := from
	err := lg.Scan(context.Background(), from, to, nil, func(off, _ int64, row []byte) error {
		if off != next {
			return fmt.Errorf("the scan gave offset %d where %d was next", off, next)
		}
		next++
		out = append(out, string(row))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestIngestEveryFormatServesAsPublished loads each format into a stream
// whose buffer holds rows a previous server left (sealed first), then
// serves it: a subscriber from offset 1 gets every row byte-identical to
// what publish stores, followed by live rows; iceberg-go reads the
// published table whole.
func TestIngestEveryFormatServesAsPublished(t *testing.T) {
	const buffered, n = 12, 2500
	for _, fmt_ := range source.Formats() {
		t.Run(string(fmt_), func(t *testing.T) {
			f := newFixture(t, "default", buffered)
			src := writeSource(t, t.TempDir(), fmt_, buffered, buffered+n)
			res, err := f.ingest([]source.Input{{Path: src, Format: fmt_}}, lifecycle.IngestOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Sealed != buffered || res.Rows != n || res.Start != buffered+1 || res.End != buffered+n+1 || !res.Published || res.Position != n {
				t.Fatalf("Ingest = %+v; want %d sealed first, %d rows at [%d,%d), published", res, buffered, n, buffered+1, buffered+n+1)
			}
			dense(t, "the published table", f.publishedOffsets(t, stream), 1, buffered+n+1)

			base := brokertest.Start(t, f.serveConfig(schemaV1))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := wire.Subscribe(ctx, base+"/"+stream, wire.SubscribeOptions{Offset: wire.At(1)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			p, err := wire.Publish(ctx, base+"/"+stream, wire.PublishOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			live := row(buffered+n, false)
			if off, err := p.Send(ctx, live); err != nil || off != buffered+n+1 {
				t.Fatalf("a live row after the load: offset %d, %v; want %d", off, err, buffered+n+1)
			}
			for off := int64(1); off <= buffered+n+1; off++ {
				msg, err := s.Recv(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if want := row(int(off-1), false); msg.Offset != off || !bytes.Equal(msg.Row, want) {
					t.Fatalf("got offset %d %s; want %d %s", msg.Offset, msg.Row, off, want)
				}
			}
		})
	}
}

// TestIngestRefusalLeavesNoGap: a source refused in its second batch
// lands its first batch and reserves nothing for the refused one: the
// next publish takes the very next offset, and the report names the row.
func TestIngestRefusalLeavesNoGap(t *testing.T) {
	f := newFixture(t, "default", 0)
	dir := t.TempDir()
	good := writeSource(t, dir, source.NDJSON, 0, 70000)
	text, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	// Line 69001 (the second batch of 65536 rows) names an undeclared column.
	lines := strings.SplitAfter(string(text), "\n")
	lines[69000] = `{"id":69000,"sym":"x","oops":1}` + "\n"
	bad := filepath.Join(dir, "bad.ndjson")
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := f.ingest([]source.Input{{Path: bad, Format: source.NDJSON}}, lifecycle.IngestOptions{NoPublish: true})
	var ie *lifecycle.IngestError
	if !errors.As(err, &ie) || !ie.Refused || ie.At.Row != 69001 || ie.At.Line != 69001 || !strings.Contains(err.Error(), `column "oops"`) {
		t.Fatalf("Ingest: %v (%+v); want a refusal of column oops at row 69001", err, ie)
	}
	if res.Rows != 65536 || res.Start != 1 || res.End != 65537 || ie.Position != 65536 {
		t.Fatalf("landed %+v; want the first batch, [1,65537)", res)
	}
	// The next ingest resumes at the refused row once it is fixed.
	lines[69000] = string(row(69000, false)) + "\n"
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ingest([]source.Input{{Path: bad, Format: source.NDJSON}}, lifecycle.IngestOptions{NoPublish: true}); !errors.Is(err, lifecycle.ErrUnfinishedIngest) || !strings.Contains(err.Error(), "--skip-rows 65536") {
		t.Fatalf("an ingest without --skip-rows after a refusal: %v; want the resume point", err)
	}
	res, err = f.ingest([]source.Input{{Path: bad, Format: source.NDJSON}}, lifecycle.IngestOptions{NoPublish: true, SkipRows: 65536, SkipRowsGiven: true})
	if err != nil || res.Start != 65537 || res.End != 70001 {
		t.Fatalf("the resumed ingest: %+v, %v; want [65537,70001)", res, err)
	}
	// A publish after it takes the next offset.
	base := brokertest.Start(t, f.serveConfig(schemaV1))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := wire.Publish(ctx, base+"/"+stream, wire.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if off, err := p.Send(ctx, row(70000, false)); err != nil || off != 70001 {
		t.Fatalf("publish after the load: offset %d, %v; want 70001", off, err)
	}
}

// TestIngestThenPublishKeepsOffsetsDense: rows buffered by a server, a
// load, then more rows appended: one dense sequence in order.
func TestIngestThenPublishKeepsOffsetsDense(t *testing.T) {
	f := newFixture(t, "default", 7)
	src := writeSource(t, t.TempDir(), source.CSV, 7, 107)
	if _, err := f.ingest([]source.Input{{Path: src, Format: source.CSV}}, lifecycle.IngestOptions{NoPublish: true}); err != nil {
		t.Fatal(err)
	}
	lg, err := logstore.Open(f.lay.LogDir(stream, stream), logstore.Writer)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	appendRows(t, lg, 107, 10, false)
	if _, err := lg.PublishAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := scanRows(t, lg, 1, 118)
	for i, r := range got {
		if want := string(row(i, false)); r != want {
			t.Fatalf("offset %d holds %s; want %s", i+1, r, want)
		}
	}
	if len(got) != 117 {
		t.Fatalf("the log holds %d rows; want 117", len(got))
	}
	dense(t, "the published table", f.publishedOffsets(t, stream), 1, 118)
}

// TestIngestRefusesWhileServeHoldsTheLog and a retired stream.
func TestIngestRefusesWhileServeHoldsTheLogOrARetiredStream(t *testing.T) {
	f := newFixture(t, "default", 3)
	src := writeSource(t, t.TempDir(), source.NDJSON, 3, 5)
	in := []source.Input{{Path: src, Format: source.NDJSON}}
	lg, err := logstore.Open(f.lay.LogDir(stream, stream), logstore.Writer)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ingest(in, lifecycle.IngestOptions{})
	lg.Close()
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("open for writing by pid %d", os.Getpid())) {
		t.Fatalf("ingest while a writer holds the log: %v; want a refusal naming pid %d", err, os.Getpid())
	}
	if _, err := f.retire(t); err != nil {
		t.Fatal(err)
	}
	_, err = f.ingest(in, lifecycle.IngestOptions{})
	if !errors.Is(err, lifecycle.ErrRetired) || !strings.Contains(err.Error(), "ending at offset 4") {
		t.Fatalf("ingest into a retired stream: %v; want a refusal naming its end 4", err)
	}
}

// The child process of the kill test: it ingests the files named by
// ingestFilesEnv from row ingestSkipEnv.
const (
	ingestFilesEnv = "LIFECYCLE_TEST_INGEST_FILES"
	ingestSkipEnv  = "LIFECYCLE_TEST_INGEST_SKIP"
)

func runIngestChild() int {
	lay, err := meta.NewLayout(os.Getenv(rootEnv), "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var inputs []source.Input
	for _, p := range strings.Split(os.Getenv(ingestFilesEnv), ",") {
		inputs = append(inputs, source.Input{Path: p, Format: source.NDJSON})
	}
	skip, _ := strconv.ParseInt(os.Getenv(ingestSkipEnv), 10, 64)
	_, err = lifecycle.Ingest(context.Background(), lifecycle.Stream{Layout: lay, Name: stream},
		lifecycle.IngestOptions{Inputs: inputs, SkipRows: skip, SkipRowsGiven: skip > 0, NoPublish: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestKilledIngestResumesExactlyOnce kills a real ingest of a multi-file
// source at random points, each time rerunning it from the resume point a
// plain rerun reports; the log then holds the source once, in order, with
// dense offsets.
func TestKilledIngestResumesExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	kills := testkit.SoakCount(5, 20)
	const files, perFile = 4, 40000
	// A log with small files, so a load writes many.
	root := t.TempDir()
	lay, err := meta.NewLayout(root, "")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{root: root, lay: lay}
	mkLog(t, f, logstore.Config{TargetFileBytes: 16 << 10})
	dir := t.TempDir()
	var paths []string
	for k := range files {
		paths = append(paths, writeSource(t, dir, source.NDJSON, k*perFile, (k+1)*perFile))
	}
	var inputs []source.Input
	for _, p := range paths {
		inputs = append(inputs, source.Input{Path: p, Format: source.NDJSON})
	}
	// How long a whole load takes here, to place the kills: time one
	// file into a scratch log.
	scratch := &fixture{root: t.TempDir()}
	if scratch.lay, err = meta.NewLayout(scratch.root, ""); err != nil {
		t.Fatal(err)
	}
	mkLog(t, scratch, logstore.Config{TargetFileBytes: 16 << 10})
	t0 := time.Now()
	cal, err := scratch.ingest(inputs[:1], lifecycle.IngestOptions{NoPublish: true})
	if err != nil {
		t.Fatal(err)
	}
	total := time.Since(t0) * files
	t.Logf("calibration: one source file in %v, into %d files", total/files, cal.Files)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	skip := int64(0)
	finished := false
	for k := 0; k < kills && !finished; k++ {
		// Short runs first, each killed at a random point of its own
		// progress; the last run may get as far as the end.
		delay := 150*time.Millisecond + time.Duration(rng.Int64N(2*int64(total)/int64(kills)+1))
		if k == kills-1 {
			delay = time.Duration(rng.Int64N(int64(total) * 3 / 2))
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=ingest", rootEnv+"="+root, ingestFilesEnv+"="+strings.Join(paths, ","), ingestSkipEnv+"="+strconv.FormatInt(skip, 10))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the ingest child failed: %v\n%s", err, stderr.String())
			}
		case <-time.After(delay):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
		// Where a rerun resumes: nothing recorded means nothing landed
		// (start again from row 0); otherwise a plain rerun reports it.
		m, ok := ingestMark(t, f)
		switch {
		case !ok:
			skip = 0
		case m.Done:
			finished = true
			if _, err := f.ingest(inputs, lifecycle.IngestOptions{NoPublish: true}); !errors.Is(err, lifecycle.ErrIngested) {
				t.Fatalf("a rerun of a finished load: %v; want it refused as loaded already", err)
			}
		default:
			_, err := f.ingest(inputs, lifecycle.IngestOptions{NoPublish: true})
			if !errors.Is(err, lifecycle.ErrUnfinishedIngest) {
				t.Fatalf("a rerun after kill %d: %v; want the resume point", k, err)
			}
			i := strings.Index(err.Error(), "--skip-rows ")
			n, perr := strconv.ParseInt(strings.TrimRight(strings.Fields(err.Error()[i+len("--skip-rows "):])[0], ";,."), 10, 64)
			if perr != nil || n < skip || n != m.Position {
				t.Fatalf("the resume point in %q: %d, %v (was %d, the mark says %d)", err, n, perr, skip, m.Position)
			}
			skip = n
		}
		t.Logf("run %d killed after %v: resume at row %d", k, delay, skip)
	}
	if !finished {
		if _, err := f.ingest(inputs, lifecycle.IngestOptions{NoPublish: true, SkipRows: skip, SkipRowsGiven: true}); err != nil {
			t.Fatal(err)
		}
	}
	lg := f.open(t, stream)
	got := scanRows(t, lg, 1, files*perFile+1)
	if len(got) != files*perFile {
		t.Fatalf("the log holds %d rows; want the source's %d once", len(got), files*perFile)
	}
	for i, r := range got {
		if want := string(row(i, false)); r != want {
			t.Fatalf("offset %d holds %s; want %s", i+1, r, want)
		}
	}
	if _, end, err := lg.Extent(context.Background()); err != nil || end != files*perFile+1 {
		t.Fatalf("the log ends at %d (%v); want %d", end, err, files*perFile+1)
	}
	dense(t, "the local files", parquetOffsets(t, f.lay.LogDir(stream, stream)), 1, files*perFile+1)
}

// mkLog creates the fixture's stream with one empty log of schemaV1 and
// the given config, and its first metadata.
func mkLog(t *testing.T, f *fixture, cfg logstore.Config) {
	t.Helper()
	sch := mustSchema(t, schemaV1)
	if err := os.MkdirAll(f.lay.StreamDir(stream), 0o755); err != nil {
		t.Fatal(err)
	}
	base := f.logConfig(stream, nil)
	cfg.Stream, cfg.Log, cfg.Published = base.Stream, base.Log, base.Published
	lg, err := logstore.Create(f.lay.LogDir(stream, stream), sch, cfg)
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
}

// ingestMark reads the log's ingest mark through a read-only handle.
func ingestMark(t *testing.T, f *fixture) (logstore.IngestMark, bool) {
	t.Helper()
	lg, err := logstore.Open(f.lay.LogDir(stream, stream), logstore.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	m, ok, err := lg.ReadIngestMark(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m, ok
}

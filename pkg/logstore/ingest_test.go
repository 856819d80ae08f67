package logstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/streamcast/streamcast/pkg/logstore/parquetfile"
	"github.com/streamcast/streamcast/pkg/schema"
)

const ingestSchemaDoc = `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":"string"},"px":{"type":"number"},"tags":{"type":["array","null"],"items":{"type":"string"}}},"required":["id","sym","px"]}`

// ingestRow is row i in canonical form.
func ingestRow(i int) []byte {
	tags := "null"
	if i%3 == 0 {
		tags = fmt.Sprintf(`["t%d"]`, i%5)
	}
	return fmt.Appendf(nil, `{"id":%d,"sym":"S%d","px":%d.5,"tags":%s}`, i, (i*7)%11, i%100, tags)
}

// rowsSource hands out canonical rows as batches of n, as a checked
// source would; fail, when set, is returned instead of batch number
// failAt.
type rowsSource struct {
	sch        *schema.Schema
	rows       [][]byte
	n          int
	sent       int
	batches    int
	failAt     int
	fail       error
	afterBatch func()
}

func (s *rowsSource) Next(ctx context.Context) (arrow.RecordBatch, error) {
	if s.fail != nil && s.batches == s.failAt {
		if s.afterBatch != nil { // a quiet pipe: wait for the end
			s.afterBatch()
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return nil, s.fail
	}
	if s.sent == len(s.rows) {
		return nil, io.EOF
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, s.sch.Arrow())
	defer b.Release()
	end := min(len(s.rows), s.sent+s.n)
	for _, r := range s.rows[s.sent:end] {
		if err := s.sch.AppendArrow(b.Fields(), r); err != nil {
			return nil, err
		}
	}
	s.sent = end
	s.batches++
	return b.NewRecordBatch(), nil
}

// TestIngestedRowsReplayAsAppendedAndSealed: the same rows ingested into
// one log and appended then sealed into another replay byte-identical,
// at the same offsets, after the same buffered rows; each row group of an
// ingested file holds a contiguous range ordered by sort_by then offset,
// and its statistics are recorded.
func TestIngestedRowsReplayAsAppendedAndSealed(t *testing.T) {
	sch, err := schema.Compile([]byte(ingestSchemaDoc))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{SortBy: []string{"sym"}, TargetFileBytes: 64 << 10}
	ingested, appended := createLog(t, sch, cfg), createLog(t, sch, cfg)
	ctx := context.Background()
	const buffered, n = 40, 20000
	var rows [][]byte
	for i := range buffered + n {
		rows = append(rows, ingestRow(i))
	}
	for _, l := range []*Log{ingested, appended} {
		if _, err := l.Append(ctx, rows[:buffered], 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Ingest refuses while rows are buffered in no file.
	if _, err := ingested.Ingest(ctx, &rowsSource{sch: sch, rows: rows[buffered:], n: 1000}, IngestOptions{}); !errors.Is(err, ErrUnsealed) {
		t.Fatalf("ingest over unsealed rows: %v; want ErrUnsealed", err)
	}
	if _, err := ingested.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	res, err := ingested.Ingest(ctx, &rowsSource{sch: sch, rows: rows[buffered:], n: 777}, IngestOptions{Source: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != n || res.Start != buffered+1 || res.End != buffered+n+1 || res.Files < 2 {
		t.Fatalf("Ingest = %+v; want %d rows at [%d,%d) in several files", res, n, buffered+1, buffered+n+1)
	}
	if m, ok, err := ingested.ReadIngestMark(ctx); err != nil || !ok || !m.Done || m.Position != n || m.Start != buffered+1 || m.End != buffered+n+1 || m.Source != "x" {
		t.Fatalf("the mark after a whole load: %+v %v %v", m, ok, err)
	}
	if _, err := appended.Append(ctx, rows[buffered:], 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := appended.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	a, b := scanOffRows(t, ingested, 1, buffered+n+1), scanOffRows(t, appended, 1, buffered+n+1)
	if len(a) != len(b) || len(a) != buffered+n {
		t.Fatalf("ingested %d rows, appended %d; want %d", len(a), len(b), buffered+n)
	}
	for i := range a {
		if a[i].off != b[i].off || a[i].row != b[i].row {
			t.Fatalf("offset %d: ingested %s, appended %s", b[i].off, a[i].row, b[i].row)
		}
	}
	checkFiles(t, ingested)

	type fileRow struct {
		start, end, rows, minTS int64
		name, stats             string
	}
	var files []fileRow
	recs, err := ingested.records().QueryContext(ctx, `SELECT start_offset, end_offset, row_count, min_ts, name, stats FROM files ORDER BY start_offset`)
	if err != nil {
		t.Fatal(err)
	}
	for recs.Next() {
		var f fileRow
		if err := recs.Scan(&f.start, &f.end, &f.rows, &f.minTS, &f.name, &f.stats); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	recs.Close()
	groups := 0
	for _, f := range files[1:] { // the first is the sealed buffer
		if f.stats == "" || f.stats == "{}" || f.minTS == 0 {
			t.Errorf("file %s has no statistics: %+v", f.name, f)
		}
		err := eachGroup(filepath.Join(ingested.FilesDir(), f.name), func(offs []int64, syms []string) error {
			groups++
			for i := 1; i < len(syms); i++ {
				c := strings.Compare(syms[i-1], syms[i])
				if c > 0 || (c == 0 && offs[i-1] >= offs[i]) {
					return fmt.Errorf("file %s: row %d (%s, %d) comes before (%s, %d): not ordered by sym then offset",
						f.name, i, syms[i-1], offs[i-1], syms[i], offs[i])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if groups <= len(files)-1 {
		t.Errorf("%d row groups in %d files; want files of several groups", groups, len(files)-1)
	}
}

// TestIngestFailureRecordsWhatWasTaken: a source failing partway lands
// every batch before the failure, nothing of it, sets a mark that is not
// done, and the next append takes the very next offset.
func TestIngestFailureRecordsWhatWasTaken(t *testing.T) {
	sch, err := schema.Compile([]byte(ingestSchemaDoc))
	if err != nil {
		t.Fatal(err)
	}
	l := createLog(t, sch, Config{})
	ctx := context.Background()
	var rows [][]byte
	for i := range 1000 {
		rows = append(rows, ingestRow(i))
	}
	refused := errors.New("refused")
	res, err := l.Ingest(ctx, &rowsSource{sch: sch, rows: rows, n: 100, failAt: 3, fail: refused}, IngestOptions{Position: 50})
	if !errors.Is(err, refused) || res.Rows != 300 || res.Start != 1 || res.End != 301 || res.Position != 350 {
		t.Fatalf("Ingest = %+v, %v; want 300 rows at [1,301), position 350, and the source's error", res, err)
	}
	if m, ok, _ := l.ReadIngestMark(ctx); !ok || m.Done || m.Position != 350 || m.End != 301 {
		t.Fatalf("the mark: %+v %v; want position 350, not done", m, ok)
	}
	first, err := l.Append(ctx, [][]byte{ingestRow(300)}, time.Now().UnixMicro(), nil)
	if err != nil || first != 301 {
		t.Fatalf("append after a failed load: %d, %v; want 301", first, err)
	}
	// No file left behind that no record names.
	names, _ := filepath.Glob(filepath.Join(l.FilesDir(), "*"))
	for _, n := range names {
		if strings.HasSuffix(n, ".partial") {
			t.Errorf("%s is left behind", n)
		}
	}
}

// TestIngestInterruptedRecordsWhatWasTaken: a load whose ctx ends while
// the source waits (a quiet pipe) records the rows taken and says it was
// cut short: never an end of the source.
func TestIngestInterruptedRecordsWhatWasTaken(t *testing.T) {
	sch, err := schema.Compile([]byte(ingestSchemaDoc))
	if err != nil {
		t.Fatal(err)
	}
	l := createLog(t, sch, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rows [][]byte
	for i := range 1000 {
		rows = append(rows, ingestRow(i))
	}
	// The source waits (a quiet pipe) once both batches are taken, and
	// the load is interrupted then.
	taken := make(chan struct{})
	src := &rowsSource{sch: sch, rows: rows, n: 100, failAt: 2, fail: errors.New("unused"), afterBatch: func() { <-taken; cancel() }}
	res, err := l.Ingest(ctx, src, IngestOptions{Progress: func(p IngestProgress) {
		if p.Taken == 200 && p.Recorded == 0 {
			close(taken)
		}
	}})
	if !errors.Is(err, context.Canceled) || res.Rows != 200 || res.End != 201 {
		t.Fatalf("Ingest = %+v, %v; want the 200 rows taken and context.Canceled", res, err)
	}
	if m, ok, _ := l.ReadIngestMark(context.Background()); !ok || m.Done || m.Position != res.Rows {
		t.Fatalf("the mark: %+v %v; want position %d, not done", m, ok, res.Rows)
	}
}

type offRow struct {
	off int64
	row string
}

func scanOffRows(t testing.TB, l *Log, from, to int64) []offRow {
	t.Helper()
	var out []offRow
	err := l.Scan(context.Background(), from, to, nil, func(off, _ int64, row []byte) error {
		out = append(out, offRow{off, string(row)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkFiles fails unless every name under files/ is a recorded file and
// the recorded files do not overlap.
func checkFiles(t testing.TB, l *Log) {
	t.Helper()
	known, err := nameSet(context.Background(), l.records(), `SELECT name FROM files`)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(l.FilesDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !known[e.Name()] {
			t.Errorf("%s is in files/ but no record names it", e.Name())
		}
	}
	spans, err := spans(context.Background(), l.records(), `SELECT start_offset, end_offset FROM files ORDER BY start_offset`)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(spans); i++ {
		if spans[i].Start != spans[i-1].End {
			t.Errorf("file [%d,%d) follows [%d,%d)", spans[i].Start, spans[i].End, spans[i-1].Start, spans[i-1].End)
		}
	}
}

// eachGroup calls fn with the offsets and syms (column 3) of each row
// group of the Parquet file at path.
func eachGroup(path string, fn func(offs []int64, syms []string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	pq, err := parquetfile.NewReader(f)
	if err != nil {
		return err
	}
	defer pq.Close()
	ar, err := pqarrow.NewFileReader(pq, pqarrow.ArrowReadProperties{BatchSize: 1 << 20}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	for i := range pq.NumRowGroups() {
		tbl, err := parquetfile.ReadRowGroup(context.Background(), ar, i)
		if err != nil {
			return err
		}
		var offs []int64
		var syms []string
		for _, c := range tbl.Column(0).Data().Chunks() {
			offs = append(offs, c.(*array.Int64).Int64Values()...)
		}
		for _, c := range tbl.Column(3).Data().Chunks() {
			s := c.(*array.String)
			for j := range s.Len() {
				syms = append(syms, s.Value(j))
			}
		}
		tbl.Release()
		if err := fn(offs, syms); err != nil {
			return err
		}
	}
	return nil
}

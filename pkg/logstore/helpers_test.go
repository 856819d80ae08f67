package logstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/streamcast/streamcast/pkg/schema"
)

// named gives cfg the names of the logs these tests make, stream "s" and
// log "log" (in <tmp>/s/log), where it gives none: Create takes a log's
// names only from its config, never from its directory.
func named(cfg Config) Config {
	if cfg.Stream == "" {
		cfg.Stream = "s"
	}
	if cfg.Log == "" {
		cfg.Log = "log"
	}
	return cfg
}

// createLog makes a fresh log in a temp dir and closes it at cleanup.
func createLog(t testing.TB, sch *schema.Schema, cfg Config, opts ...Option) *Log {
	t.Helper()
	l, err := Create(filepath.Join(t.TempDir(), "s", "log"), sch, named(cfg), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// openLog opens dir in mode and closes it at cleanup.
func openLog(t testing.TB, dir string, mode Mode, opts ...Option) *Log {
	t.Helper()
	l, err := Open(dir, mode, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// withScanChunk makes the handle's scans read the buffer at most groups
// commit groups at a time, so a scan crosses many reads.
func withScanChunk(groups int) Option {
	return func(o *options) { o.chunkGroups = groups }
}

// fakeClock is a Clock that moves only when the test moves it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

// Now is the clock's time; fc.Now is the Clock to pass.
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// anyRow is the canonical row the tests append for a tag.
func anyRow(tag string) []byte {
	return fmt.Appendf(nil, `{"tag":%q,"pad":"%s"}`, tag, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")
}

// batch returns n rows tagged prefix-0 … prefix-(n-1).
func batch(prefix string, n int) [][]byte {
	rows := make([][]byte, n)
	for i := range rows {
		rows[i] = anyRow(fmt.Sprintf("%s-%d", prefix, i))
	}
	return rows
}

type scanned struct {
	off, ts int64
	row     string
}

// scanAll returns every row Scan yields for [from, to).
func scanAll(t testing.TB, l *Log, from, to int64) []scanned {
	t.Helper()
	out, err := scanRange(l, from, to)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func scanRange(l *Log, from, to int64) ([]scanned, error) {
	var out []scanned
	err := l.Scan(context.Background(), from, to, nil, func(off, ts int64, row []byte) error {
		out = append(out, scanned{off, ts, string(row)})
		return nil
	})
	return out, err
}

// expectation is what a test appended: offset → row bytes and ts.
type expectation map[int64]scanned

func (e expectation) add(first, ts int64, rows [][]byte) {
	for i, r := range rows {
		off := first + int64(i)
		e[off] = scanned{off, ts, string(r)}
	}
}

// check verifies that got is exactly e restricted to [from, to), in order.
func (e expectation) check(got []scanned, from, to int64) error {
	want := from
	for _, s := range got {
		if s.off != want {
			return fmt.Errorf("scan of [%d,%d) yielded offset %d where %d was expected", from, to, s.off, want)
		}
		w, ok := e[s.off]
		if !ok {
			return fmt.Errorf("scan yielded offset %d, which was never acknowledged", s.off)
		}
		if w != s {
			return fmt.Errorf("offset %d: got (ts %d) %s, want (ts %d) %s", s.off, s.ts, s.row, w.ts, w.row)
		}
		want++
	}
	if want != to {
		return fmt.Errorf("scan of [%d,%d) stopped at %d", from, to, want)
	}
	return nil
}

// checkFilesDir verifies that files/ holds exactly the completed files.
func checkFilesDir(t testing.TB, l *Log) {
	t.Helper()
	known := map[string]bool{}
	rows, err := l.rdb.Query(`SELECT name FROM files`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		known[n] = true
	}
	rows.Close()
	entries, err := os.ReadDir(filepath.Join(l.dir, FilesDir))
	if err != nil {
		t.Fatal(err)
	}
	var extra []string
	for _, e := range entries {
		if !known[e.Name()] {
			extra = append(extra, e.Name())
		}
		delete(known, e.Name())
	}
	sort.Strings(extra)
	if len(extra) > 0 || len(known) > 0 {
		t.Fatalf("files/ holds unrecorded %v; records name missing %v", extra, known)
	}
}

// checkNoOverlap verifies that completed files tile a prefix of the
// offsets without gaps or overlaps, and that buffer groups never start
// inside a file twice over.
func checkNoOverlap(t testing.TB, l *Log) {
	t.Helper()
	rows, err := l.rdb.Query(`SELECT start_offset, end_offset FROM files ORDER BY start_offset`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	prev := int64(-1)
	for rows.Next() {
		var s, e int64
		if err := rows.Scan(&s, &e); err != nil {
			t.Fatal(err)
		}
		if prev == -1 {
			prev = s // earlier files may have gone (published, then cleaned)
			if s < 1 {
				t.Fatalf("a file starts at offset %d", s)
			}
		}
		if s != prev || e <= s {
			t.Fatalf("file [%d,%d) follows a file ending at %d", s, e, prev)
		}
		prev = e
	}
}

func isRange(err error) bool {
	var re *RangeError
	return errors.As(err, &re)
}

func schemaAny() *schema.Schema { return schema.Any() }

type arrowRecord = arrow.Record

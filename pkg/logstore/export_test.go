package logstore

import (
	"context"
	"testing"
	"time"

	"github.com/charmbracelet/log"
)

// RoleRun is how this package's tests ask for a maintenance role to run
// over a log, as `streamcast maintain` runs it.
type RoleRun struct {
	Every, FlushEvery time.Duration
	// RepeatEvery is how often a repeating failure is logged again; the
	// tests that count failed passes make it short.
	RepeatEvery time.Duration
	Logger      *log.Logger
	Ready       func()
}

// RunRole runs a maintenance role (by name) over dirs until ctx ends. The
// runner lives in pkg/logstore/maintain, above this package, which this
// package's own tests cannot import; its external tests hand it in here
// (roles_ext_test.go) before any test runs, in a helper child process too.
var RunRole func(ctx context.Context, role string, dirs []string, o RoleRun) error

// RoleNames are the roles RunRole runs, in serve's order; set beside it.
var RoleNames []string

// setOverride applies policy overrides to an open handle, as WithOverride
// does at open, for tests that change them between steps.
func (l *Log) setOverride(o Config) {
	l.polMu.Lock()
	l.pol = l.cfg.Override(o)
	l.polMu.Unlock()
}

// Steps are pkg/logstore/tier's maintenance steps, which this package's
// internal tests cannot import (tier imports logstore); steps_ext_test.go
// hands them in before any test runs, as roles_ext_test.go hands in
// RunRole. The methods below let the tests call them as they always did.
var Steps struct {
	Seal, Compact, Publish func(ctx context.Context, l *Log, flush bool) (int64, error)
	Evict, PublishAll      func(ctx context.Context, l *Log) (int64, error)
	Clean, CleanPublished  func(ctx context.Context, l *Log) (Cleaned, error)
	DeleteBelow            func(ctx context.Context, l *Log, floor int64) (Deleted, error)
}

// Cleaned mirrors tier.Cleaned for this package's tests.
type Cleaned struct {
	BufferRows int64
	LocalFiles int
	Deleted    int
	Expired    int
}

// Deleted mirrors tier.Deleted for this package's tests.
type Deleted struct {
	LocalFiles     int64
	PublishedFiles int64
	BufferedRows   int64
}

func (l *Log) Seal(ctx context.Context, flush bool) (int64, error) {
	return Steps.Seal(ctx, l, flush)
}

func (l *Log) Compact(ctx context.Context, flush bool) (int64, error) {
	return Steps.Compact(ctx, l, flush)
}

func (l *Log) Publish(ctx context.Context, flush bool) (int64, error) {
	return Steps.Publish(ctx, l, flush)
}

func (l *Log) Evict(ctx context.Context) (int64, error) { return Steps.Evict(ctx, l) }

func (l *Log) PublishAll(ctx context.Context) (int64, error) { return Steps.PublishAll(ctx, l) }

func (l *Log) Clean(ctx context.Context) (Cleaned, error) { return Steps.Clean(ctx, l) }

func (l *Log) CleanPublished(ctx context.Context) (Cleaned, error) {
	return Steps.CleanPublished(ctx, l)
}

func (l *Log) DeleteBelow(ctx context.Context, floor int64) (Deleted, error) {
	return Steps.DeleteBelow(ctx, l, floor)
}

// fileRange is a local or published file's record, as the tests read it.
type fileRange struct {
	start, end int64
	name, path string
	rows       int64
	fileBytes  int64
}

// recordedFiles reads the records of table (files or published) in offset
// order.
func recordedFiles(t testing.TB, l *Log, table string) []fileRange {
	t.Helper()
	col := "''"
	if table == "published" {
		col = "path"
	}
	rows, err := l.rdb.QueryContext(context.Background(), `SELECT start_offset, end_offset, name, `+col+`, row_count, file_bytes FROM `+table+` ORDER BY start_offset`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []fileRange
	for rows.Next() {
		var f fileRange
		if err := rows.Scan(&f.start, &f.end, &f.name, &f.path, &f.rows, &f.fileBytes); err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

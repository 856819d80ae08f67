package logstore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/schema"
)

func TestCreateRefusesAnExistingLog(t *testing.T) {
	l := createLog(t, schema.Any(), Config{})
	_, err := Create(l.Dir(), schema.Any(), named(Config{}))
	if err == nil || !strings.Contains(err.Error(), l.Dir()) {
		t.Fatalf("Create over an existing log: got %v, want a refusal naming %s", err, l.Dir())
	}
	// Even with the writer gone.
	l.Close()
	if _, err := Create(l.Dir(), schema.Any(), named(Config{})); err == nil {
		t.Fatal("Create over a closed existing log succeeded")
	}
}

func TestOpenMissingLogNamesThePath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	for _, mode := range []Mode{Writer, Maintainer, ReadOnly} {
		_, err := Open(dir, mode)
		if err == nil || !strings.Contains(err.Error(), dir) || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Open(%s, %s) = %v; want fs.ErrNotExist naming the path", dir, mode, err)
		}
	}
}

func TestConfigIsStoredAndReadBack(t *testing.T) {
	stored := Config{TargetSealBytes: 12345, Published: "s3://bucket/some/path", S3: warehouse.S3{Endpoint: "http://127.0.0.1:1", Region: "eu-west-3", PathStyle: true},
		TargetFileBytes: 1 << 20, StagingRetention: time.Minute, DeleteGrace: time.Second}
	l := createLog(t, schema.Any(), stored)
	want := stored.WithDefaults()
	want.Stream, want.Log = "s", "log" // taken from <tmp>/s/log, since none was given
	if want.StagingMaxBytes != DefaultStagingMaxBytes || want.LocalDeleteGrace != DefaultLocalDeleteGrace || want.StagingRetention != time.Minute {
		t.Fatalf("defaults filled wrongly: %+v", want)
	}
	if got := l.Config(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Config() = %+v, want %+v", got, want)
	}
	l.Close()
	r := openLog(t, l.Dir(), ReadOnly)
	if got := r.Config(); !reflect.DeepEqual(got, want) {
		t.Fatalf("reopened Config() = %+v, want %+v", got, want)
	}
	if !r.Schema().IsAny() {
		t.Fatal("reopened schema lost IsAny")
	}
	d := createLog(t, schema.Any(), Config{})
	if got := d.Config().TargetSealBytes; got != DefaultTargetSealBytes {
		t.Fatalf("default target_seal_bytes = %d, want %d", got, DefaultTargetSealBytes)
	}
}

func TestCreateRefusesABadConfig(t *testing.T) {
	for _, cfg := range []Config{{TargetSealBytes: -1}, {SortBy: []string{"x"}}, {Published: "~/dir"}, {Published: "s3://"},
		{Published: "s3://key:secret@bucket/x"}, {Stream: "a/b"}, {Log: ".."},
		{Published: "file:///"}, {Published: "gs://bucket/x"}, {StagingRetention: -time.Second}, {TargetFileBytes: -1},
		{S3: warehouse.S3{Endpoint: "127.0.0.1:9000"}}} {
		if _, err := Create(filepath.Join(t.TempDir(), "l"), schema.Any(), named(cfg)); err == nil {
			t.Errorf("Create with %+v succeeded", cfg)
		}
	}
}

func TestOffsetsStartAtOneAndAreDenseUnderConcurrentAppenders(t *testing.T) {
	l := createLog(t, schema.Any(), Config{})
	ctx := context.Background()
	const workers, appends = 8, 60
	type ack struct{ first, n int64 }
	var mu sync.Mutex
	var acks []ack
	exp := expectation{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range appends {
				rows := batch(string(rune('a'+w))+"-"+itoa(i), 1+(i*7+w)%5)
				first, err := l.Append(ctx, rows, int64(w*1000+i), nil)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acks = append(acks, ack{first, int64(len(rows))})
				exp.add(first, int64(w*1000+i), rows)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(acks, func(i, j int) bool { return acks[i].first < acks[j].first })
	next := int64(1)
	for _, a := range acks {
		if a.first != next {
			t.Fatalf("a group starts at %d where %d was expected: offsets are not dense", a.first, next)
		}
		next += a.n
	}
	earliest, end, err := l.Extent(ctx)
	if err != nil || earliest != 1 || end != next {
		t.Fatalf("Extent = %d, %d, %v; want 1, %d", earliest, end, err, next)
	}
	if err := exp.check(scanAll(t, l, 1, end), 1, end); err != nil {
		t.Fatal(err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestOffsetsAreNeverReusedAfterTheBufferEmpties(t *testing.T) {
	ctx := context.Background()
	l := createLog(t, schema.Any(), Config{TargetSealBytes: 1024})
	exp := expectation{}
	for i := range 20 {
		rows := batch("r"+itoa(i), 3)
		first, err := l.Append(ctx, rows, 7, nil)
		if err != nil {
			t.Fatal(err)
		}
		exp.add(first, 7, rows)
	}
	if _, err := l.Seal(ctx, true); err != nil {
		t.Fatal(err)
	}
	n, err := l.Evict(ctx)
	if err != nil || n != 60 {
		t.Fatalf("Evict = %d, %v; want 60 rows", n, err)
	}
	var groups int
	l.rdb.QueryRow(`SELECT count(*) FROM groups`).Scan(&groups)
	if groups != 0 {
		t.Fatalf("%d groups left after evicting everything", groups)
	}
	// VACUUM must not matter either.
	if _, err := l.wconn.ExecContext(ctx, "VACUUM"); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openLog(t, l.Dir(), Writer)
	rows := batch("after", 2)
	first, err := l.Append(ctx, rows, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first != 61 {
		t.Fatalf("first offset after the buffer emptied = %d, want 61", first)
	}
	exp.add(first, 8, rows)
	if err := exp.check(scanAll(t, l, 1, 63), 1, 63); err != nil {
		t.Fatal(err)
	}
}

func TestAFailedAppendConsumesNoOffset(t *testing.T) {
	l := createLog(t, schema.Any(), Config{})
	ctx := context.Background()
	if _, err := l.Append(ctx, batch("a", 2), 1, nil); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Append(cancelled, batch("b", 5), 1, nil); err == nil {
		t.Fatal("append with a cancelled context succeeded")
	}
	if _, err := l.Append(ctx, nil, 1, nil); err == nil {
		t.Fatal("append of no rows succeeded")
	}
	first, err := l.Append(ctx, batch("c", 1), 1, nil)
	if err != nil || first != 3 {
		t.Fatalf("append after failures = %d, %v; want offset 3", first, err)
	}
	if _, end, _ := l.Extent(ctx); end != 4 {
		t.Fatalf("end = %d, want 4", end)
	}
}

func TestOnlyTheWriterAppends(t *testing.T) {
	l := createLog(t, schema.Any(), Config{})
	ctx := context.Background()
	for _, mode := range []Mode{Maintainer, ReadOnly} {
		h := openLog(t, l.Dir(), mode)
		if _, err := h.Append(ctx, batch("x", 1), 1, nil); !errors.Is(err, ErrNotWriter) {
			t.Errorf("%s Append: got %v, want ErrNotWriter", mode, err)
		}
	}
	r := openLog(t, l.Dir(), ReadOnly)
	if _, err := r.Seal(ctx, true); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only Seal: got %v, want ErrReadOnly", err)
	}
	if _, err := r.Evict(ctx); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only Evict: got %v, want ErrReadOnly", err)
	}
}

func TestASecondWriterInTheSameProcessIsRefused(t *testing.T) {
	l := createLog(t, schema.Any(), Config{})
	_, err := Open(l.Dir(), Writer)
	var le *LockedError
	if !errors.As(err, &le) || le.PID != os.Getpid() || le.Path != filepath.Join(l.Dir(), "lock") {
		t.Fatalf("second writer: got %v, want a LockedError naming pid %d", err, os.Getpid())
	}
	l.Close()
	openLog(t, l.Dir(), Writer)
}

func TestMarksAreStoredWithTheirRows(t *testing.T) {
	l := createLog(t, schema.Any(), Config{})
	ctx := context.Background()
	if _, err := l.Append(ctx, batch("a", 2), 1, []Mark{{"p1", 2, 2}, {"p2", 9, 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, batch("b", 1), 1, []Mark{{"p1", 3, 3}}); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Append(cancelled, batch("c", 1), 1, []Mark{{"p1", 4, 4}}); err == nil {
		t.Fatal("cancelled append succeeded")
	}
	got, err := l.Marks(ctx)
	want := []Mark{{"p1", 3, 3}, {"p2", 9, 1}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Marks = %v, %v; want %v", got, err, want)
	}
}

func TestScanOutsideTheExtentIsARangeError(t *testing.T) {
	l := createLog(t, schema.Any(), Config{})
	ctx := context.Background()
	if err := l.Scan(ctx, 1, 1, nil, nil); err != nil {
		t.Fatalf("empty scan of an empty log: %v", err)
	}
	if _, err := l.Append(ctx, batch("a", 3), 1, nil); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{0, 2}, {1, 5}, {3, 2}, {5, 5}} {
		err := l.Scan(ctx, r[0], r[1], nil, func(int64, int64, []byte) error { return nil })
		if !isRange(err) {
			t.Errorf("Scan(%d,%d) = %v, want a RangeError", r[0], r[1], err)
		}
	}
	if got := scanAll(t, l, 4, 4); len(got) != 0 {
		t.Errorf("scan at the end yielded %v", got)
	}
}

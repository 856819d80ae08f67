package logstore

import (
	"context"
	"errors"
	"testing"
)

// checkEnd reopens the log in dir and checks that every reader of the end
// agrees on want: a read-only handle's Status and Extent, and the Writer,
// whose next append lands at want.
func checkEnd(t *testing.T, dir string, want int64) {
	t.Helper()
	ctx := context.Background()
	r := openLog(t, dir, ReadOnly)
	st, err := r.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, end, err := r.Extent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if st.End != want || end != want {
		t.Fatalf("after reopening, Status says the end is %d and Extent %d; want %d", st.End, end, want)
	}
	w := openLog(t, dir, Writer)
	first, err := w.Append(ctx, batch("next", 2), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if first != want {
		t.Fatalf("after reopening, the next append landed at %d; want %d", first, want)
	}
}

// TestTheEndIsRightAfterReopenWhateverLastMovedIt: Append does not write
// meta next_offset, so the end is derived from the last buffered group
// and next_offset (endSQL). Each case leaves the log with the end set by a
// different path, closes it, and checks the end after reopening: no offset
// handed out twice, none skipped (I1).
func TestTheEndIsRightAfterReopenWhateverLastMovedIt(t *testing.T) {
	ctx := context.Background()
	appendN := func(t *testing.T, l *Log, groups int) {
		t.Helper()
		for i := range groups {
			if _, err := l.Append(ctx, batch("g"+itoa(i), 3), 1, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name string
		cfg  Config
		// run leaves the log to be reopened and returns the end it must have.
		run func(t *testing.T, l *Log) int64
	}{
		{"appends only", Config{}, func(t *testing.T, l *Log) int64 {
			appendN(t, l, 5)
			return 16
		}},
		{"nothing appended, start past 1 (a migrated log)", Config{Start: 41}, func(t *testing.T, l *Log) int64 {
			if err := l.ImportMarks(ctx, []Mark{{Publisher: "p", LastSeq: 9, LastOffset: 40}}); err != nil {
				t.Fatal(err)
			}
			return 41
		}},
		{"buffer emptied by seal and evict", tierConfig(), func(t *testing.T, l *Log) int64 {
			appendN(t, l, 5)
			if _, err := l.Seal(ctx, true); err != nil {
				t.Fatal(err)
			}
			if n, err := l.Evict(ctx); err != nil || n != 15 {
				t.Fatalf("Evict = %d, %v; want 15 rows", n, err)
			}
			return 16
		}},
		{"buffer emptied by delete-below", tierConfig(), func(t *testing.T, l *Log) int64 {
			appendN(t, l, 5)
			if _, err := l.Seal(ctx, true); err != nil {
				t.Fatal(err)
			}
			if err := l.SetFloor(ctx, 16); err != nil {
				t.Fatal(err)
			}
			if _, err := l.DeleteBelow(ctx, 16); err != nil {
				t.Fatal(err)
			}
			return 16
		}},
		{"last group deleted alone", Config{}, func(t *testing.T, l *Log) int64 {
			// Not a step streamcast runs; the trigger covers any delete.
			appendN(t, l, 5)
			if err := l.update(ctx, func(tx *recordTx) error {
				_, err := tx.ExecContext(ctx, `DELETE FROM groups WHERE first = 13`)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return 16
		}},
		{"ingest into an empty buffer", Config{}, func(t *testing.T, l *Log) int64 {
			if err := l.AdvanceNext(ctx, 1, 101, func(*recordTx) error { return nil }); err != nil {
				t.Fatal(err)
			}
			return 101
		}},
		{"ingest past buffered groups", Config{}, func(t *testing.T, l *Log) int64 {
			appendN(t, l, 2)
			if err := l.AdvanceNext(ctx, 7, 107, func(*recordTx) error { return nil }); err != nil {
				t.Fatal(err)
			}
			return 107
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := createLog(t, schemaAny(), c.cfg)
			want := c.run(t, l)
			dir := l.Dir()
			l.Close()
			checkEnd(t, dir, want)
		})
	}
	t.Run("fenced", func(t *testing.T) {
		l := createLog(t, schemaAny(), tierConfig())
		appendN(t, l, 4)
		if _, err := l.Seal(ctx, true); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Evict(ctx); err != nil {
			t.Fatal(err)
		}
		end, err := l.Fence(ctx)
		if err != nil || end != 13 {
			t.Fatalf("Fence = %d, %v; want 13", end, err)
		}
		dir := l.Dir()
		l.Close()
		w := openLog(t, dir, Writer)
		st, err := w.Status(ctx)
		if err != nil || st.End != 13 {
			t.Fatalf("Status after reopening a fenced log: end %d, %v; want 13", st.End, err)
		}
		var fe *FencedError
		if _, err := w.Append(ctx, batch("x", 1), 1, nil); !errors.As(err, &fe) || fe.End != 13 {
			t.Fatalf("Append to the reopened fenced log = %v; want a FencedError at 13", err)
		}
	})
	t.Run("next_offset is the end or a buffered group's first", func(t *testing.T) {
		// So an older streamcast, which takes next_offset for the end,
		// fails on the groups' primary key rather than reuse an offset
		// once evict has taken the groups below it.
		l := createLog(t, schemaAny(), tierConfig())
		appendN(t, l, 5)
		if _, err := l.Seal(ctx, true); err != nil {
			t.Fatal(err)
		}
		appendN(t, l, 3)
		if n, err := l.Evict(ctx); err != nil || n != 15 {
			t.Fatalf("Evict = %d, %v; want 15 rows", n, err)
		}
		var stored, firstBuffered int64
		if err := l.rdb.QueryRow(`SELECT (SELECT v FROM meta WHERE k = 'next_offset'), (SELECT min(first) FROM groups)`).Scan(&stored, &firstBuffered); err != nil {
			t.Fatal(err)
		}
		if stored != firstBuffered {
			t.Fatalf("stored next_offset is %d after evicting [1,16) with [16,25) buffered; want 16, where an older writer's insert collides", stored)
		}
	})
	t.Run("log made before the trigger", func(t *testing.T) {
		// Such a log's next_offset is exact (every commit wrote it); Open
		// adds the trigger before anything appends or evicts.
		l := createLog(t, schemaAny(), tierConfig())
		if err := l.update(ctx, func(tx *recordTx) error {
			_, err := tx.ExecContext(ctx, `DROP TRIGGER groups_keep_end`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		dir := l.Dir()
		l.Close()
		l = openLog(t, dir, Maintainer)
		var n int
		if err := l.rdb.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name = 'groups_keep_end'`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("the trigger after a Maintainer open: %d, %v; want it there", n, err)
		}
	})
}

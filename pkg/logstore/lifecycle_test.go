package logstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// checkTableFrom verifies that the published table holds offsets
// [start, end) exactly once each, with the acknowledged stamps.
func checkTableFrom(t testing.TB, l *Log, exp expectation, start, end int64) {
	t.Helper()
	offs, ts := tableOffsets(t, l)
	if int64(len(offs)) != end-start {
		t.Fatalf("the published table holds %d rows; want [%d,%d), %d rows", len(offs), start, end, end-start)
	}
	for i, o := range offs {
		if o != start+int64(i) {
			t.Fatalf("the published table holds offset %d at position %d, want %d: a duplicate, a gap or a wrong start", o, i, start+int64(i))
		}
		if w, ok := exp[o]; !ok || w.ts != ts[i] {
			t.Fatalf("published offset %d has ts %d; acknowledged %v", o, ts[i], w)
		}
	}
}

func TestALogStartedAtAnOffsetIsDenseFromItInEveryTier(t *testing.T) {
	ctx := context.Background()
	cfg := tierConfig()
	cfg.Start = 1000
	l := createLog(t, mustCompile(t, tradeSchema), cfg)
	if e, n, err := l.Extent(ctx); err != nil || e != 1000 || n != 1000 {
		t.Fatalf("extent of an empty log started at 1000 = [%d,%d) %v, want [1000,1000)", e, n, err)
	}
	exp := expectation{}
	appendTrades(t, l, exp, 40, 25)
	for off := int64(1000); off < 2000; off++ {
		if _, ok := exp[off]; !ok {
			t.Fatalf("offset %d was not assigned; the acknowledged offsets are not dense from 1000", off)
		}
	}
	dir := l.Dir()
	l.Close()
	l = openLog(t, dir, Writer)
	if got := l.Config().Start; got != 1000 {
		t.Fatalf("reopened log reports start %d, want 1000", got)
	}
	appendTrades(t, l, exp, 1, 1)
	if _, ok := exp[2000]; !ok {
		t.Fatal("the append after reopen did not get offset 2000")
	}
	end, err := l.PublishAll(ctx)
	if err != nil || end != 2001 {
		t.Fatalf("PublishAll = %d, %v; want 2001", end, err)
	}
	checkTableFrom(t, l, exp, 1000, 2001)
	if got := scanAll(t, l, 1000, 2001); exp.check(got, 1000, 2001) != nil {
		t.Fatal(exp.check(got, 1000, 2001))
	}
	if _, err := scanRange(l, 999, 1001); !isRange(err) {
		t.Fatalf("a scan from 999 of a log started at 1000 = %v; want a range error", err)
	}
	if _, err := Create(filepath.Join(t.TempDir(), "s", "log"), schemaAny(), named(Config{Start: -5})); err == nil || !strings.Contains(err.Error(), "start is -5") {
		t.Fatalf("Create with start -5 = %v; want a refusal naming it", err)
	}
}

func TestFenceRefusesAppendsForGoodButNotReadsOrMaintenance(t *testing.T) {
	ctx := context.Background()
	l := createLog(t, mustCompile(t, tradeSchema), tierConfig())
	exp := expectation{}
	appendTrades(t, l, exp, 10, 10)
	end, err := l.Fence(ctx)
	if err != nil || end != 101 {
		t.Fatalf("Fence = %d, %v; want 101", end, err)
	}
	if again, err := l.Fence(ctx); err != nil || again != end {
		t.Fatalf("a second Fence = %d, %v; want %d", again, err, end)
	}
	row := canonical(t, l.Schema(), [][]byte{tradeRow(0)})
	refused := func(l *Log, when string) {
		t.Helper()
		_, err := l.Append(ctx, row, 1, nil)
		var fe *FencedError
		if !errors.Is(err, ErrFenced) || !errors.As(err, &fe) || fe.End != 101 || !strings.Contains(err.Error(), "101") {
			t.Fatalf("%s: Append = %v; want ErrFenced naming 101", when, err)
		}
	}
	refused(l, "after Fence")
	if st, err := l.Status(ctx); err != nil || !st.Fenced || st.End != 101 {
		t.Fatalf("Status = %+v, %v; want fenced at 101", st, err)
	}
	dir := l.Dir()
	l.Close()
	l = openLog(t, dir, Writer)
	refused(l, "after Close and Open")
	// Reads and every tier still work.
	if got := scanAll(t, l, 1, 101); exp.check(got, 1, 101) != nil {
		t.Fatal(exp.check(got, 1, 101))
	}
	if n, err := l.PublishAll(ctx); err != nil || n != 101 {
		t.Fatalf("PublishAll on a fenced log = %d, %v", n, err)
	}
	checkTableFrom(t, l, exp, 1, 101)
	if _, err := l.Evict(ctx); err != nil {
		t.Fatal(err)
	}
	if got := scanAll(t, l, 1, 101); exp.check(got, 1, 101) != nil {
		t.Fatal(exp.check(got, 1, 101))
	}
}

func TestFenceSurvivesSIGKILL(t *testing.T) {
	l := createLog(t, schemaAny(), Config{})
	if _, err := l.Append(context.Background(), batch("a", 5), 1, nil); err != nil {
		t.Fatal(err)
	}
	dir := l.Dir()
	l.Close()
	c := startHelper(t, "fence", dir, "")
	if line := <-c.lines; line != "fenced 6" {
		t.Fatalf("helper said %q, want fenced 6", line)
	}
	c.kill()
	l = openLog(t, dir, Writer)
	if _, err := l.Append(context.Background(), batch("b", 1), 2, nil); !errors.Is(err, ErrFenced) {
		t.Fatalf("Append after the fencing process was killed = %v; want ErrFenced", err)
	}
}

func TestImportMarksOnlyIntoALogThatNeverHeldARow(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Start: 51}
	l := createLog(t, schemaAny(), cfg)
	marks := []Mark{{Publisher: "p1", LastSeq: 7, LastOffset: 50}, {Publisher: "p2", LastSeq: 3, LastOffset: 44}}
	for range 2 { // a rerun is a no-op
		if err := l.ImportMarks(ctx, marks); err != nil {
			t.Fatal(err)
		}
	}
	dir := l.Dir()
	l.Close()
	l = openLog(t, dir, Writer)
	got, err := l.Marks(ctx)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(marks) {
		t.Fatalf("marks after reopen = %v, %v; want %v", got, err, marks)
	}
	if _, err := l.Append(ctx, batch("a", 1), 1, []Mark{{Publisher: "p1", LastSeq: 8, LastOffset: 51}}); err != nil {
		t.Fatal(err)
	}
	err = l.ImportMarks(ctx, marks)
	if err == nil || !strings.Contains(err.Error(), "[51,52)") {
		t.Fatalf("ImportMarks into a log with a row = %v; want a refusal naming [51,52)", err)
	}
	if got, _ := l.Marks(ctx); got[0].LastSeq != 8 {
		t.Fatalf("a refused import changed the marks: %v", got)
	}
}

func TestPublishAllRefusesWhileAMaintainerHoldsARole(t *testing.T) {
	l := createLog(t, schemaAny(), tierConfig())
	if _, err := l.Append(context.Background(), batch("a", 5), 1, nil); err != nil {
		t.Fatal(err)
	}
	c := startHelper(t, "hold-role", l.Dir(), "publish")
	_, err := l.PublishAll(context.Background())
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", c.cmd.Process.Pid)) {
		t.Fatalf("PublishAll with publish.lock held = %v; want ErrBusy naming pid %d", err, c.cmd.Process.Pid)
	}
}

func TestPublishAllFinishesOnTheRerunAfterSIGKILL(t *testing.T) {
	for _, point := range []string{"seal:written", "publish-all:sealed", "publish:uploaded", "publish:committed"} {
		t.Run(point, func(t *testing.T) {
			ctx := context.Background()
			l := createLog(t, mustCompile(t, tradeSchema), tierConfig())
			exp := expectation{}
			appendTrades(t, l, exp, 30, 20)
			// Half of it already sealed and published by the roles.
			if _, err := l.Seal(ctx, false); err != nil {
				t.Fatal(err)
			}
			appendTrades(t, l, exp, 10, 20)
			dir := l.Dir()
			l.Close()
			c := startHelper(t, "publish-all", dir, point)
			select {
			case line := <-c.lines:
				if line != "at "+point {
					t.Fatalf("helper said %q, want to stop at %s", line, point)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("helper never reached %s", point)
			}
			c.kill()
			l = openLog(t, dir, Writer)
			end, err := l.PublishAll(ctx)
			if err != nil || end != 801 {
				t.Fatalf("rerun PublishAll = %d, %v; want 801", end, err)
			}
			checkTableFrom(t, l, exp, 1, 801)
			checkNoOverlap(t, l)
		})
	}
}

func TestPublishAllOfAnEmptyLogIsANoop(t *testing.T) {
	l := createLog(t, schemaAny(), Config{Start: 7})
	if end, err := l.PublishAll(context.Background()); err != nil || end != 7 {
		t.Fatalf("PublishAll = %d, %v; want 7", end, err)
	}
}

func TestFenceRacingAppendsLetNoRowPastTheEnd(t *testing.T) {
	ctx := context.Background()
	l := createLog(t, schemaAny(), Config{})
	acked := make(chan int64, 1<<16) // end of each acknowledged group
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				first, err := l.Append(ctx, batch(fmt.Sprintf("w%d-%d", w, i), 3), 1, nil)
				if errors.Is(err, ErrFenced) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				acked <- first + 3
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(acked) < 20 { // the appenders are running: wait for the event, bounded
		if time.Now().After(deadline) {
			t.Fatal("the appenders acknowledged fewer than 20 groups in 30s")
		}
		time.Sleep(time.Millisecond)
	}
	end, err := l.Fence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(acked)
	for e := range acked {
		if e > end {
			t.Fatalf("a group ending at %d was acknowledged; the fence put the end at %d", e, end)
		}
	}
	if _, n, _ := l.Extent(ctx); n != end {
		t.Fatalf("the log ends at %d; the fence said %d", n, end)
	}
}

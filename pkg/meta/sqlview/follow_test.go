package sqlview

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestFollowConvergesOnTheOneShotAnswer re-pins a growing history on each
// refresh: every result is of one whole cut, names the offset it is
// consistent to, and once the history stops growing the view shows what a
// one-shot query does.
func TestFollowConvergesOnTheOneShotAnswer(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	recs := randomHistory(rng, 6, 20)
	var ends []int64 // ends[k]: the end of the first k+1 files
	var end int64
	for _, r := range recs {
		end += r.NumRows()
		ends = append(ends, end)
	}
	cuts := make([]*fileTable, len(recs))
	for k := range recs {
		cuts[k] = writeFiles(t, testSchema, recs[:k+1])
	}
	pins, closed := 0, 0
	pinner := PinFunc(func(ctx context.Context) (Pin, error) {
		k := min(pins, len(cuts)-1) // publishing stops at the last cut
		pins++
		e := ends[k]
		if k%2 == 1 {
			e = -1 // let Follow find it
		}
		return Pin{Table: cuts[k], End: e, Close: func() error { closed++; return nil }}, nil
	})
	const q = "SELECT sym, count(*) AS n, sum(qty) AS q FROM log GROUP BY sym ORDER BY sym"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	refreshes := 0
	err := Follow(ctx, pinner, Options{}, q, time.Millisecond, nil, func(r Refresh) error {
		refreshes++
		k := min(r.Seq-1, len(cuts)-1)
		if r.End != ends[k] {
			t.Errorf("refresh %d: consistent to %d, want %d", r.Seq, r.End, ends[k])
		}
		if err := WriteRefresh(&out, r, FormatNDJSON); err != nil {
			return err
		}
		if r.Seq == len(cuts)+1 {
			cancel()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if refreshes != len(cuts)+1 || closed != pins {
		t.Fatalf("%d refreshes and %d of %d cuts closed, want %d refreshes and every cut closed", refreshes, closed, pins, len(cuts)+1)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	oneShot := strings.ReplaceAll(strings.TrimSpace(query(t, openView(t, cuts[len(cuts)-1], Options{}), q)), "\n", ",")
	if want := fmt.Sprintf(`"end_offset":%d,`, end); !strings.Contains(last, want) || !strings.HasSuffix(last, `"rows":[`+oneShot+`]}`) {
		t.Fatalf("the last refresh\n%s\nis not the one-shot answer\n%s (end %d)", last, oneShot, end)
	}
}

// TestFollowStopsOnAPinError checks a view whose Pinner cannot cut
// exactly (as when the tail outgrew its bound) ends with that error
// rather than showing part of a cut.
func TestFollowStopsOnAPinError(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	tbl := writeFiles(t, testSchema, randomHistory(rng, 2, 5))
	errTail := errors.New("the tail holds 1000001 rows, past --max-tail 1000000")
	n := 0
	pinner := PinFunc(func(context.Context) (Pin, error) {
		if n++; n == 3 {
			return Pin{}, errTail
		}
		return Pin{Table: tbl, End: -1}, nil
	})
	emitted := 0
	err := Follow(context.Background(), pinner, Options{}, "SELECT count(*) FROM log", time.Millisecond, nil, func(r Refresh) error {
		emitted++
		return nil
	})
	if !errors.Is(err, errTail) || emitted != 2 {
		t.Fatalf("got %v after %d results, want the pin's error after 2", err, emitted)
	}
}

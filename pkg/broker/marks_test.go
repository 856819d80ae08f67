package broker

import (
	"slices"
	"testing"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/wire"
)

// testJob is the smallest markJob: a frame's state and the rows it appends.
type testJob struct {
	f    markedFrame
	rows [][]byte
}

func (j *testJob) MarkFrame() *markedFrame { return &j.f }
func (j *testJob) Rows() int               { return len(j.rows) }

func rowsOf(n int) [][]byte { return make([][]byte, n) }

// queue judges a frame of n rows at seq and, when it is to be queued,
// returns its job.
func queue(t *testing.T, m *streamMarks[*testJob], h *markHolder, seq int64, n int) (*testJob, markVerdict, markAnswer) {
	t.Helper()
	j := &testJob{}
	v, rows, a := m.Judge(h, &j.f, seq, rowsOf(n))
	j.rows = rows
	return j, v, a
}

// commit runs a group through Admit and Record as the committer and
// deliverer do, the log's next offset being next, and returns the answers.
func commit(m *streamMarks[*testJob], jobs []*testJob, next int64, failed string) ([]logstore.Mark, []markAnswer) {
	marks := m.Admit(jobs, next, nil)
	if failed != "" {
		m.Rollback(jobs)
	}
	answers := make([]markAnswer, len(jobs))
	m.Record(jobs, next, failed, func(i int, a markAnswer) { answers[i] = a })
	m.Done(jobs)
	return marks, answers
}

// TestJudgeQueuesRepliesAndDrops: against a stored mark, a frame that skips
// seqs is a sequence gap, a frame of committed rows is answered at once as a
// duplicate with their offsets (null beyond what is known), a frame
// overlapping the mark queues only its new rows, and the hold of a
// superseded connection gets Drop.
func TestJudgeQueuesRepliesAndDrops(t *testing.T) {
	m := newStreamMarks[*testJob]([]logstore.Mark{{Publisher: "p", LastSeq: 5, LastOffset: 50}})
	superseded := 0
	h := m.Claim("p", func() { superseded++ })
	if mk, ok := m.Settle(h); !ok || mk.LastSeq != 5 || mk.LastOffset != 50 {
		t.Fatalf("greeting mark %+v %v; want last_seq 5 at offset 50", mk, ok)
	}
	if _, v, a := queue(t, m, h, 8, 1); v != Reply || a.Gap == nil || a.Gap.Expected != 6 {
		t.Fatalf("seq 8 after 5: %v %+v; want a sequence gap expecting 6", v, a)
	}
	if _, v, a := queue(t, m, h, 4, 2); v != Reply || !a.Duplicate || !slices.Equal(a.Offsets, []int64{wire.Null, 50}) {
		t.Fatalf("seqs 4-5: %v %+v; want a duplicate with offsets [null 50]", v, a)
	}
	j, v, _ := queue(t, m, h, 5, 3)
	if v != Queue || len(j.rows) != 2 || j.f.skip != 1 {
		t.Fatalf("seqs 5-7: %v, %d rows queued (skip %d); want seqs 6-7 queued", v, len(j.rows), j.f.skip)
	}
	marks, answers := commit(m, []*testJob{j}, 51, "")
	if len(marks) != 1 || marks[0] != (logstore.Mark{Publisher: "p", LastSeq: 7, LastOffset: 52}) {
		t.Fatalf("marks committed with the group: %+v; want p at seq 7, offset 52", marks)
	}
	if a := answers[0]; a.Duplicate || !slices.Equal(a.Offsets, []int64{50, 51, 52}) {
		t.Fatalf("answer %+v; want offsets [50 51 52], not a duplicate", a)
	}
	h2 := m.Claim("p", nil)
	if superseded != 1 {
		t.Fatalf("the first hold was superseded %d times; want once", superseded)
	}
	if _, v, _ := queue(t, m, h, 8, 1); v != Drop {
		t.Fatalf("a superseded hold's frame: %v; want Drop", v)
	}
	if mk, ok := m.Settle(h2); !ok || mk.LastSeq != 7 {
		t.Fatalf("the new hold's mark %+v; want last_seq 7", mk)
	}
}

// TestFailedCommitRollsBackAndFailsTheFramesBehind: a group whose Append
// failed takes appended and accepted back to the log's mark, and a frame
// queued behind it fails its Admit instead of landing after a hole.
func TestFailedCommitRollsBackAndFailsTheFramesBehind(t *testing.T) {
	m := newStreamMarks[*testJob](nil)
	h := m.Claim("p", nil)
	m.Settle(h)
	a, _, _ := queue(t, m, h, 1, 2)
	b, _, _ := queue(t, m, h, 3, 1)
	_, answers := commit(m, []*testJob{a}, 1, "disk full")
	if answers[0].Failed != "disk full" {
		t.Fatalf("answer of the failed group: %+v", answers[0])
	}
	if st, _ := m.State("p"); st.Accepted != 0 || st.Appended != 0 || st.Pending != 1 {
		t.Fatalf("after the failure: %+v; want accepted and appended 0, one frame pending", st)
	}
	if _, answers := commit(m, []*testJob{b}, 1, ""); answers[0].Failed == "" || !b.f.Failed() {
		t.Fatalf("the frame behind the failed one: %+v; want commit_failed", answers[0])
	}
	if j, v, _ := queue(t, m, h, 1, 2); v != Queue || len(j.rows) != 2 {
		t.Fatalf("seqs 1-2 sent again: %v; want them queued", v)
	}
}

// TestTheDedupeWindowForgetsOldFrames: a duplicate of a frame older than
// the last DedupeWindow committed frames is answered with null offsets.
func TestTheDedupeWindowForgetsOldFrames(t *testing.T) {
	m := newStreamMarks[*testJob](nil)
	h := m.Claim("p", nil)
	m.Settle(h)
	for s := int64(1); s <= DedupeWindow+2; s++ {
		j, _, _ := queue(t, m, h, s, 1)
		commit(m, []*testJob{j}, 100+s, "")
	}
	if _, _, a := queue(t, m, h, 3, 1); !slices.Equal(a.Offsets, []int64{103}) {
		t.Fatalf("seq 3, inside the window: %+v; want offset 103", a)
	}
	if _, _, a := queue(t, m, h, 2, 1); !slices.Equal(a.Offsets, []int64{wire.Null}) {
		t.Fatalf("seq 2, beyond the window: %+v; want a null offset", a)
	}
}

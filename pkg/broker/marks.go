package broker

// The exactly-once state of a stream: each publisher id's mark, the
// verdict on each frame an exactly-once publisher sends, the marks a group
// commits with its rows, and the dedupe window that answers a duplicate
// with its original offsets (docs/design.md, exactly-once publishers).
//
// A publisher that connects with &publisher=ID to a stream declared
// exactly_once numbers its rows: each frame is [seq, row] or [seq, [rows…]],
// the rows taking seq, seq+1, …. The stream keeps one mark per id, the last
// seq committed and the offset of its row, and commits the mark in the same
// SQLite transaction as the rows (logstore.Append's marks), so the mark can
// never run ahead of or behind the rows, across a restart or a SIGKILL.
//
// Three seq positions are kept per id, in this order:
//
//	lastSeq  ≤  appended  ≤  accepted
//
// accepted is what the reader judges frames against: it counts rows queued
// for commit and not yet committed, so a frame sent right behind another is
// judged as its successor, not as a gap. appended is the committer's: the
// last seq handed to an Append that succeeded (or is in progress). lastSeq
// (with lastOffset) is the committed mark as subscribers have seen it: it
// moves after the group is fanned out, with the dedupe window.
//
// Judging a frame of n rows at seq s against accepted A:
//   - s > A+1: sequence_gap {expected A+1, got s}; nothing is queued.
//   - s+n-1 ≤ A: a duplicate, not appended; the reply is
//     {"ok":[…],"duplicate":true} with the original offsets while the rows
//     are in the dedupe window (the last DedupeWindow committed frames of
//     the id, for the maxCachedPublisher most recently active ids of the
//     stream), null beyond it. A duplicate of rows still queued is answered
//     once they commit, so its offsets are known and durable (I3).
//   - otherwise the rows above A are queued (a frame overlapping the mark
//     appends only its new rows); the reply is {"ok":[…]} with every row's
//     offset: the original offsets of the repeated part when the window
//     still holds them, null when not. "duplicate":true means nothing of
//     the frame was appended.
//
// A fresh id's mark is last_seq 0 and last_offset null, so its first seq is
// 1; seq 0 and negative seqs are refused as bad_frame.
//
// A commit that fails rolls accepted and appended back to the last seq the
// log holds, and every frame of that id queued behind the failed one is
// answered commit_failed too (it would otherwise land after a hole): the
// publisher resends from the mark. A second connection with the same id
// supersedes the first: the first reads no more frames, its queued frames
// are committed and answered, then it is closed 4409; the second is greeted
// only once every row queued under the id is settled, so its last_seq
// counts them all.
//
// streamMarks knows nothing of connections: a connection's hold on an id
// is a markHolder (with the func that supersedes it), a queued frame is
// whatever job type the caller gives it (markJob), and a reply is a
// markAnswer in plain values that the caller encodes. It never appends rows
// and never reads a socket; the committer commits the marks Admit returns
// in the same transaction as the rows.

import (
	"container/list"
	"fmt"
	"sync"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/wire"
)

// Bounds of the in-memory dedupe state of one stream. streamMarks themselves are
// kept for every id the log holds (a few dozen bytes each); only the window of
// committed ranges that maps a seq back to its offset is bounded.
const (
	// DedupeWindow is how many committed frames are remembered per
	// publisher id: a duplicate of an older one is answered with null
	// offsets.
	DedupeWindow       = 64
	maxCachedPublisher = 4096 // publisher ids per stream with a dedupe window (LRU)
)

// seqRange is one committed frame's appended rows: seqs [seq, seq+n) went to
// offsets [off, off+n).
type seqRange struct{ seq, n, off int64 }

// pubState is one exactly-once publisher id of a stream. Every field is
// guarded by streamMarks.mu.
type pubState struct {
	id         string
	owner      *markHolder // the connection's hold on this id; nil when none
	accepted   int64       // last seq queued or committed (frames are judged against it)
	appended   int64       // last seq in an Append that succeeded or is running (committer)
	lastSeq    int64       // committed mark; 0 when the id never committed a row
	lastOffset int64       // offset of lastSeq's row; wire.Null when lastSeq is 0
	pending    int         // frames queued under this id and not yet answered

	window []seqRange    // ring of the last DedupeWindow committed ranges; nil when evicted
	head   int           // next slot of a full window to overwrite
	lru    *list.Element // position in streamMarks.lru while it holds a window
	gen    uint64        // admit generation that last stored a mark for this id
	idx    int           // index of that mark in the group's marks
}

// markHolder is one connection's hold on a publisher id, from Claim to Release.
// The connection reads no further frame once it is superseded; its queued
// frames are still committed and answered.
type markHolder struct {
	id        string
	ps        *pubState
	queued    int    // frames queued through this hold and not yet answered; guarded by streamMarks.mu
	supersede func() // called (without streamMarks.mu) when a newer hold takes the id
}

// markedFrame is an exactly-once publish frame's state while it is queued: the
// caller's job type holds one (the zero markedFrame is a plain frame, from a
// publisher without an id) and hands it over through markJob.
type markedFrame struct {
	h            *markHolder // nil on a plain frame
	seq          int64       // seq of the frame's first row
	n            int         // rows in the frame; the job appends the last n-skip
	skip         int         // leading rows at or below the mark, not appended again
	failed       string      // set by Admit: why the frame cannot be committed
	prevAppended int64       // ps.appended before Admit, for Rollback
}

// Marked reports whether the frame is an exactly-once one (Judge queued it).
func (f *markedFrame) Marked() bool { return f.h != nil }

// Failed reports whether Admit refused the frame: its rows must not be
// appended, and Record answers it commit_failed.
func (f *markedFrame) Failed() bool { return f.failed != "" }

// markJob is a queued publish frame as streamMarks sees it.
type markJob interface {
	// MarkFrame returns the frame's exactly-once state (a zero markedFrame for a
	// plain frame); the pointer stays the same for the job's life.
	MarkFrame() *markedFrame
	// Rows is how many rows the job appends (after Judge, those above the
	// mark).
	Rows() int
}

// markAnswer is the reply a frame is owed, in plain values: the caller encodes
// it. Exactly one of Failed, Gap, Offsets and First/N is meaningful, in
// that order.
type markAnswer struct {
	Failed    string            // commit_failed, with this detail
	Gap       *wire.SequenceGap // sequence_gap: the frame skips seqs
	Offsets   []int64           // every row's offset (wire.Null where forgotten)
	Duplicate bool              // with Offsets: nothing of the frame was appended
	First     int64             // a plain frame: N rows committed from First
	N         int
}

// streamMarks is the exactly-once state of one stream, J being the caller's job
// type.
type streamMarks[J markJob] struct {
	// mu guards every pubState and markHolder.queued. The reader judges, the
	// committer admits, the deliverer records under it, so a frame's verdict,
	// its place in the commit order and the mark it moves are one sequence.
	mu sync.Mutex
	// settled is broadcast when an id's pending or a hold's queued count
	// drops to zero, and when an id changes hands.
	settled sync.Cond
	pubs    map[string]*pubState
	lru     list.List // ids holding a dedupe window, most recently committed first
	gen     uint64
}

// newStreamMarks builds a stream's exactly-once state from the marks its log holds.
func newStreamMarks[J markJob](stored []logstore.Mark) *streamMarks[J] {
	m := &streamMarks[J]{pubs: make(map[string]*pubState, len(stored))}
	m.settled.L = &m.mu
	for _, mk := range stored {
		m.pubs[mk.Publisher] = &pubState{
			id: mk.Publisher, accepted: mk.LastSeq, appended: mk.LastSeq,
			lastSeq: mk.LastSeq, lastOffset: mk.LastOffset,
		}
	}
	return m
}

// Claim makes a new hold the one publishing under id and returns it. The
// hold it takes the id from, if any, is superseded: its supersede func is
// called, after Claim has let go of its lock.
func (m *streamMarks[J]) Claim(id string, supersede func()) *markHolder {
	h := &markHolder{id: id, supersede: supersede}
	m.mu.Lock()
	ps := m.pubs[id]
	if ps == nil {
		ps = &pubState{id: id, lastOffset: wire.Null}
		m.pubs[id] = ps
	}
	old := ps.owner
	ps.owner, h.ps = h, ps
	m.settled.Broadcast() // an older claimant waiting to settle gives up
	m.mu.Unlock()
	if old != nil && old.supersede != nil {
		old.supersede()
	}
	return h
}

// TryClaim is Claim for a hold that takes only a free id, superseding
// nothing: it returns nil while another hold has the id. The hold has no
// supersede func, so a later Claim takes the id from it without stopping
// anything; the frames it queued are still committed and answered first.
func (m *streamMarks[J]) TryClaim(id string) *markHolder {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.pubs[id]
	if ps == nil {
		ps = &pubState{id: id, lastOffset: wire.Null}
		m.pubs[id] = ps
	} else if ps.owner != nil {
		return nil
	}
	h := &markHolder{id: id, ps: ps}
	ps.owner = h
	return h
}

// Settle waits until every frame queued under h's id (through any hold) is
// committed or failed, and returns the mark to greet h's connection with.
// It reports false when another hold claimed the id meanwhile.
func (m *streamMarks[J]) Settle(h *markHolder) (wire.PublisherMark, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := h.ps
	for ps.pending > 0 && ps.owner == h {
		m.settled.Wait()
	}
	if ps.owner != h {
		return wire.PublisherMark{}, false
	}
	// Nothing is queued, so nothing is accepted beyond the committed mark.
	ps.accepted, ps.appended = ps.lastSeq, ps.lastSeq
	return wire.PublisherMark{ID: ps.id, LastSeq: ps.lastSeq, LastOffset: ps.lastOffset}, true
}

// Release gives h's id up when its connection ends (a no-op when h was
// superseded, or is nil).
func (m *streamMarks[J]) Release(h *markHolder) {
	if h == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h.ps.owner == h {
		h.ps.owner = nil
		m.forgetLocked(h.ps)
	}
}

// forgetLocked drops an id that holds nothing worth keeping, so ids that
// connect and never commit do not pile up.
func (m *streamMarks[J]) forgetLocked(ps *pubState) {
	if ps.owner == nil && ps.pending == 0 && ps.lastSeq == 0 && m.pubs[ps.id] == ps {
		delete(m.pubs, ps.id)
	}
}

// WaitQueued waits until every frame queued through h is answered.
func (m *streamMarks[J]) WaitQueued(h *markHolder) {
	m.mu.Lock()
	for h.queued > 0 {
		m.settled.Wait()
	}
	m.mu.Unlock()
}

// markVerdict is how a judged frame proceeds.
type markVerdict int

const (
	// Queue: queue the job with the rows Judge returned (those above the
	// mark; none for a duplicate of rows still queued).
	Queue markVerdict = iota
	// Reply: answer now with the returned markAnswer.
	Reply
	// Drop: the id was taken over; no reply, the connection is closing 4409.
	Drop
)

// Judge decides what to do with an exactly-once frame of rows starting at
// seq, sent through h. For Queue it fills f, counts the frame as pending
// and returns the rows to append; the caller must queue the job or call
// Unqueue.
func (m *streamMarks[J]) Judge(h *markHolder, f *markedFrame, seq int64, rows [][]byte) (markVerdict, [][]byte, markAnswer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := h.ps
	if ps.owner != h {
		return Drop, nil, markAnswer{}
	}
	n := int64(len(rows))
	last := seq + n - 1
	a := ps.accepted
	switch {
	case seq > a+1:
		return Reply, nil, markAnswer{Gap: &wire.SequenceGap{Expected: a + 1, Got: seq}}
	case last <= a && last <= ps.lastSeq:
		// Every row is committed: answer at once (the slot order still puts
		// the reply behind those of earlier frames).
		return Reply, nil, markAnswer{Offsets: ps.offsets(make([]int64, 0, n), seq, n), Duplicate: true}
	}
	skip := int64(0)
	if seq <= a {
		skip = min(a-seq+1, n)
	}
	f.h, f.seq, f.n, f.skip = h, seq, int(n), int(skip)
	if last > a {
		ps.accepted = last
	}
	ps.pending++
	h.queued++
	return Queue, rows[skip:], markAnswer{}
}

// Unqueue undoes Judge for a job the caller could not queue (shutdown).
func (m *streamMarks[J]) Unqueue(j J) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := j.MarkFrame()
	if j.Rows() > 0 {
		// The reader judges one frame at a time, so nothing was accepted
		// behind this job; a failed commit may already have lowered it.
		f.h.ps.accepted = min(f.h.ps.accepted, f.seq+int64(f.skip)-1)
	}
	m.doneLocked(f)
}

// Admit runs on the committer before a group's Append: it checks that each
// exactly-once job still follows the last seq appended under its id (a job
// queued behind a frame whose commit failed does not, and is failed with a
// commit_failed detail instead of landing after a hole), advances appended,
// and returns the marks to commit with the group: the last per id, with the
// offset its row will get (the committer is the log's one appender, so it
// knows the next offset). dst is reused.
func (m *streamMarks[J]) Admit(jobs []J, next int64, dst []logstore.Mark) []logstore.Mark {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	dst = dst[:0]
	off := next
	for _, j := range jobs {
		f, rows := j.MarkFrame(), j.Rows()
		if f.h == nil {
			off += int64(rows)
			continue
		}
		ps := f.h.ps
		last := f.seq + int64(f.n) - 1
		if rows == 0 {
			if last > ps.appended {
				f.failed = fmt.Sprintf("this frame repeats seqs %d to %d, which were queued but did not commit; "+
					"nothing was committed — resend from seq %d", f.seq, last, ps.appended+1)
			}
			continue
		}
		first := f.seq + int64(f.skip)
		if first != ps.appended+1 {
			f.failed = fmt.Sprintf("seqs %d to %d follow rows that did not commit; nothing of this frame was committed — "+
				"resend from seq %d", first, last, ps.appended+1)
			continue
		}
		f.prevAppended = ps.appended
		ps.appended = last
		off += int64(rows)
		mk := logstore.Mark{Publisher: ps.id, LastSeq: last, LastOffset: off - 1}
		if ps.gen == m.gen {
			dst[ps.idx] = mk
		} else {
			ps.gen, ps.idx = m.gen, len(dst)
			dst = append(dst, mk)
		}
	}
	return dst
}

// Rollback undoes Admit after the group's Append failed: the rows are not
// in the log, so appended and accepted go back to what the log holds, and
// the publisher may send the same seqs again. Frames queued behind the
// failed ones fail their Admit.
func (m *streamMarks[J]) Rollback(jobs []J) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(jobs) - 1; i >= 0; i-- {
		f := jobs[i].MarkFrame()
		if f.h == nil || f.failed != "" || jobs[i].Rows() == 0 {
			continue
		}
		f.h.ps.appended = f.prevAppended
	}
	for _, j := range jobs {
		if f := j.MarkFrame(); f.h != nil {
			f.h.ps.accepted = min(f.h.ps.accepted, f.h.ps.appended)
		}
	}
}

// Record runs on the deliverer after a group committed (first is its first
// offset) and was fanned out: it moves each id's committed mark and dedupe
// window and calls answer with every job's reply. A group that failed
// (failed != "") gets commit_failed for each job.
func (m *streamMarks[J]) Record(jobs []J, first int64, failed string, answer func(i int, a markAnswer)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	off := first
	for i, j := range jobs {
		f, rows := j.MarkFrame(), int64(j.Rows())
		switch {
		case f.failed != "":
			answer(i, markAnswer{Failed: f.failed})
			continue
		case failed != "":
			answer(i, markAnswer{Failed: failed})
			continue
		case f.h == nil:
			answer(i, markAnswer{First: off, N: int(rows)})
			off += rows
			continue
		}
		ps := f.h.ps
		offs := make([]int64, 0, f.n)
		offs = ps.offsets(offs, f.seq, int64(f.skip))
		for k := range rows {
			offs = append(offs, off+k)
		}
		if rows > 0 {
			ps.lastSeq, ps.lastOffset = f.seq+int64(f.n)-1, off+rows-1
			m.remember(ps, seqRange{seq: f.seq + int64(f.skip), n: rows, off: off})
			off += rows
		}
		answer(i, markAnswer{Offsets: offs, Duplicate: rows == 0})
	}
}

// Done counts the answered exactly-once jobs of a group as settled.
func (m *streamMarks[J]) Done(jobs []J) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, j := range jobs {
		if f := j.MarkFrame(); f.h != nil {
			m.doneLocked(f)
		}
	}
}

func (m *streamMarks[J]) doneLocked(f *markedFrame) {
	h := f.h
	ps := h.ps
	ps.pending--
	h.queued--
	if ps.pending == 0 || h.queued == 0 {
		m.settled.Broadcast()
	}
	m.forgetLocked(ps)
}

// remember adds a committed range to ps's dedupe window, making ps the most
// recently active id; the least recently active id beyond the cache bound
// loses its window (its duplicates are then answered with null offsets).
func (m *streamMarks[J]) remember(ps *pubState, r seqRange) {
	if ps.lru == nil {
		ps.lru = m.lru.PushFront(ps)
		if m.lru.Len() > maxCachedPublisher {
			e := m.lru.Back()
			old := e.Value.(*pubState)
			m.lru.Remove(e)
			old.lru, old.window, old.head = nil, nil, 0
		}
	} else {
		m.lru.MoveToFront(ps.lru)
	}
	if len(ps.window) < DedupeWindow {
		ps.window = append(ps.window, r)
		return
	}
	ps.window[ps.head] = r
	ps.head = (ps.head + 1) % DedupeWindow
}

// offsets appends the committed offsets of seqs [seq, seq+n): the original
// offset when the dedupe window (or the mark itself) still knows it, else
// wire.Null.
func (ps *pubState) offsets(dst []int64, seq, n int64) []int64 {
	for s := seq; s < seq+n; s++ {
		off := wire.Null
		if s == ps.lastSeq {
			off = ps.lastOffset
		} else {
			for _, r := range ps.window {
				if s >= r.seq && s < r.seq+r.n {
					off = r.off + (s - r.seq)
					break
				}
			}
		}
		dst = append(dst, off)
	}
	return dst
}

// markState is what streamMarks holds of one publisher id, for /stats and tests.
type markState struct {
	Accepted   int64 // last seq queued or committed
	Appended   int64 // last seq handed to an Append
	LastSeq    int64 // the committed mark
	LastOffset int64 // its row's offset; wire.Null when LastSeq is 0
	Pending    int   // frames queued under the id and not yet answered
}

// State returns what is held of id, and false when nothing is.
func (m *streamMarks[J]) State(id string) (markState, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.pubs[id]
	if ps == nil {
		return markState{}, false
	}
	return markState{Accepted: ps.accepted, Appended: ps.appended, LastSeq: ps.lastSeq, LastOffset: ps.lastOffset, Pending: ps.pending}, true
}

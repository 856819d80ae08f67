package broker

import (
	"container/list"
	"fmt"
	"strconv"
	"sync"

	"github.com/streamcast/streamcast/pkg/broker/frame"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/wire"
)

// Exactly-once publishing.
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
// accepted is what the reader judges frames against: it counts rows queued for
// commit and not yet committed, so a frame sent right behind another is
// judged as its successor, not as a gap. appended is the committer's: the last
// seq handed to an Append that succeeded (or is in progress). lastSeq (with
// lastOffset) is the committed mark as subscribers have seen it: it moves after
// the group is fanned out, with the dedupe window.
//
// Judging a frame of n rows at seq s against accepted A:
//   - s > A+1: sequence_gap {expected A+1, got s}; nothing is queued.
//   - s+n-1 ≤ A: a duplicate, not appended; the reply is {"ok":[…],"duplicate":true}
//     with the original offsets while the rows are in the dedupe window (the
//     last 64 committed frames of the id, for the 4,096 most recently active
//     ids of the stream), null beyond it. A duplicate of rows still queued is
//     answered once they commit, so its offsets are known and durable (I3).
//   - otherwise the rows above A are queued (a frame overlapping the mark
//     appends only its new rows); the reply is {"ok":[…]} with every row's
//     offset: the original offsets of the repeated part when the window still
//     holds them, null when not. "duplicate":true means nothing of the frame
//     was appended.
//
// A fresh id's mark is last_seq 0 and last_offset null, so its first seq is 1;
// seq 0 and negative seqs are refused as bad_frame.
//
// A commit that fails rolls accepted and appended back to the last seq the log
// holds, and every frame of that id queued behind the failed one is answered
// commit_failed too (it would otherwise land after a hole): the publisher
// resends from the mark. A second connection with the same id supersedes the
// first: the first reads no more frames, its queued frames are committed and
// answered, then it is closed 4409; the second is greeted only once every row
// queued under the id is settled, so its last_seq counts them all.

// Bounds of the in-memory dedupe state of one stream. Marks themselves are
// kept for every id the log holds (a few dozen bytes each); only the window of
// committed ranges that maps a seq back to its offset is bounded.
const (
	dedupeWindow       = 64   // committed frames remembered per publisher id
	maxCachedPublisher = 4096 // publisher ids per stream with a dedupe window (LRU)
)

// seqRange is one committed frame's appended rows: seqs [seq, seq+n) went to
// offsets [off, off+n).
type seqRange struct{ seq, n, off int64 }

// pubState is one exactly-once publisher id of a stream. Every field is
// guarded by the stream's marks.mu.
type pubState struct {
	id         string
	owner      *publisher // the connection publishing under this id; nil when none
	accepted   int64      // last seq queued or committed (frames are judged against it)
	appended   int64      // last seq in an Append that succeeded or is running (committer)
	lastSeq    int64      // committed mark; 0 when the id never committed a row
	lastOffset int64      // offset of lastSeq's row; wire.Null when lastSeq is 0
	pending    int        // frames queued under this id and not yet answered

	window []seqRange    // ring of the last dedupeWindow committed ranges; nil when evicted
	head   int           // next slot of a full window to overwrite
	lru    *list.Element // position in marks.lru while it holds a window
	gen    uint64        // admit generation that last stored a mark for this id
	idx    int           // index of that mark in the group's marks
}

// marks is the exactly-once state of one stream.
type marks struct {
	// mu guards every pubState and publisher.queued. The reader judges, the
	// committer admits, the deliverer records under it, so a frame's verdict,
	// its place in the commit order and the mark it moves are one sequence.
	mu sync.Mutex
	// settled is broadcast when a publisher's pending or a connection's
	// queued count drops to zero, and when an id changes hands.
	settled sync.Cond
	pubs    map[string]*pubState
	lru     list.List // ids holding a dedupe window, most recently committed first
	gen     uint64
}

// newMarks builds a stream's exactly-once state from the marks its log holds.
func newMarks(stored []logstore.Mark) *marks {
	m := &marks{pubs: make(map[string]*pubState, len(stored))}
	m.settled.L = &m.mu
	for _, mk := range stored {
		m.pubs[mk.Publisher] = &pubState{
			id: mk.Publisher, accepted: mk.LastSeq, appended: mk.LastSeq,
			lastSeq: mk.LastSeq, lastOffset: mk.LastOffset,
		}
	}
	return m
}

// claim makes p the connection publishing under its id and returns the
// connection it takes the id from (nil when none), which the caller
// supersedes.
func (m *marks) claim(p *publisher) (old *publisher) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.pubs[p.id]
	if ps == nil {
		ps = &pubState{id: p.id, lastOffset: wire.Null}
		m.pubs[p.id] = ps
	}
	old, ps.owner, p.ps = ps.owner, p, ps
	m.settled.Broadcast() // an older claimant waiting to settle gives up
	return old
}

// settle waits until every frame queued under p's id (by any connection) is
// committed or failed, and returns the mark to greet p with. It reports false
// when another connection claimed the id meanwhile.
func (m *marks) settle(p *publisher) (wire.PublisherMark, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := p.ps
	for ps.pending > 0 && ps.owner == p {
		m.settled.Wait()
	}
	if ps.owner != p {
		return wire.PublisherMark{}, false
	}
	// Nothing is queued, so nothing is accepted beyond the committed mark.
	ps.accepted, ps.appended = ps.lastSeq, ps.lastSeq
	return wire.PublisherMark{ID: ps.id, LastSeq: ps.lastSeq, LastOffset: ps.lastOffset}, true
}

// release gives p's id up when p ends (a no-op when p was superseded).
func (m *marks) release(p *publisher) {
	if p.ps == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p.ps.owner == p {
		p.ps.owner = nil
		m.forgetLocked(p.ps)
	}
}

// forgetLocked drops an id that holds nothing worth keeping, so ids that
// connect and never commit do not pile up.
func (m *marks) forgetLocked(ps *pubState) {
	if ps.owner == nil && ps.pending == 0 && ps.lastSeq == 0 && m.pubs[ps.id] == ps {
		delete(m.pubs, ps.id)
	}
}

// waitQueued waits until every frame p queued is answered.
func (m *marks) waitQueued(p *publisher) {
	m.mu.Lock()
	for p.queued > 0 {
		m.settled.Wait()
	}
	m.mu.Unlock()
}

// verdict is how a judged frame proceeds.
type verdict int

const (
	verdictQueue verdict = iota // queue the job (its rows above the mark; none for a duplicate of queued rows)
	verdictReply                // answer now with the returned reply
	verdictDrop                 // the id was taken over: no reply, the connection is closing 4409
)

// judge decides what to do with an exactly-once frame of rows starting at
// seq. For verdictQueue it sets j's rows (those above the mark) and counts
// the job as pending; the caller must queue it or call unqueue.
func (m *marks) judge(p *publisher, j *job, seq int64, rows [][]byte) (verdict, []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := p.ps
	if ps.owner != p {
		return verdictDrop, nil
	}
	n := int64(len(rows))
	last := seq + n - 1
	a := ps.accepted
	switch {
	case seq > a+1:
		gap := wire.SequenceGap{Expected: a + 1, Got: seq}
		return verdictReply, frame.Reply(48, gap.AppendReply)
	case last <= a && last <= ps.lastSeq:
		// Every row is committed: answer at once (the slot order still puts
		// the reply behind those of earlier frames).
		offs := ps.offsets(make([]int64, 0, n), seq, n)
		return verdictReply, frame.OffsetsReply(offs, true)
	}
	skip := int64(0)
	if seq <= a {
		skip = min(a-seq+1, n)
	}
	j.ps, j.seq, j.n, j.skip = ps, seq, int(n), int(skip)
	j.rows = rows[skip:]
	if last > a {
		ps.accepted = last
	}
	ps.pending++
	p.queued++
	return verdictQueue, nil
}

// unqueue undoes judge for a job the inbox refused (shutdown).
func (m *marks) unqueue(j *job) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(j.rows) > 0 {
		// The reader judges one frame at a time, so nothing was accepted
		// behind this job; a failed commit may already have lowered it.
		j.ps.accepted = min(j.ps.accepted, j.seq+int64(j.skip)-1)
	}
	m.doneLocked(j)
}

// admit runs on the committer before a group's Append: it checks that each
// exactly-once job still follows the last seq appended under its id (a job
// queued behind a frame whose commit failed does not, and is failed with a
// commit_failed detail instead of landing after a hole), advances appended,
// and returns the marks to commit with the group: the last per id, with the
// offset its row will get (the committer is the log's one appender, so it
// knows the next offset). dst is reused.
func (m *marks) admit(jobs []*job, next int64, dst []logstore.Mark) []logstore.Mark {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	dst = dst[:0]
	off := next
	for _, j := range jobs {
		if j.ps == nil {
			off += int64(len(j.rows))
			continue
		}
		ps := j.ps
		last := j.seq + int64(j.n) - 1
		if len(j.rows) == 0 {
			if last > ps.appended {
				j.failed = fmt.Sprintf("this frame repeats seqs %d to %d, which were queued but did not commit; "+
					"nothing was committed — resend from seq %d", j.seq, last, ps.appended+1)
			}
			continue
		}
		first := j.seq + int64(j.skip)
		if first != ps.appended+1 {
			j.failed = fmt.Sprintf("seqs %d to %d follow rows that did not commit; nothing of this frame was committed — "+
				"resend from seq %d", first, last, ps.appended+1)
			continue
		}
		j.prevAppended = ps.appended
		ps.appended = last
		off += int64(len(j.rows))
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

// rollback undoes admit after the group's Append failed: the rows are not in
// the log, so appended and accepted go back to what the log holds, and the
// publisher may send the same seqs again. Frames queued behind the failed
// ones fail their admit.
func (m *marks) rollback(jobs []*job) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(jobs) - 1; i >= 0; i-- {
		j := jobs[i]
		if j.ps == nil || j.failed != "" || len(j.rows) == 0 {
			continue
		}
		j.ps.appended = j.prevAppended
	}
	for _, j := range jobs {
		if j.ps != nil {
			j.ps.accepted = min(j.ps.accepted, j.ps.appended)
		}
	}
}

// record runs on the deliverer after a group committed (first is its first
// offset) and was fanned out: it moves each id's committed mark and dedupe
// window and writes every job's reply into replies. A group that failed
// (failed != "") gets commit_failed for each job.
func (m *marks) record(jobs []*job, first int64, failed string, replies [][]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	off := first
	for i, j := range jobs {
		switch {
		case j.failed != "":
			replies[i] = frame.ErrorReply(wire.ReplyCommitFailed, j.failed)
			continue
		case failed != "":
			replies[i] = frame.ErrorReply(wire.ReplyCommitFailed, failed)
			continue
		case j.ps == nil:
			replies[i] = frame.OKReply(off, len(j.rows))
			off += int64(len(j.rows))
			continue
		}
		ps := j.ps
		offs := make([]int64, 0, j.n)
		offs = ps.offsets(offs, j.seq, int64(j.skip))
		for k := range j.rows {
			offs = append(offs, off+int64(k))
		}
		if k := int64(len(j.rows)); k > 0 {
			ps.lastSeq, ps.lastOffset = j.seq+int64(j.n)-1, off+k-1
			m.remember(ps, seqRange{seq: j.seq + int64(j.skip), n: k, off: off})
			off += k
		}
		replies[i] = frame.OffsetsReply(offs, len(j.rows) == 0)
	}
}

// done counts the answered exactly-once jobs of a group as settled.
func (m *marks) done(jobs []*job) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, j := range jobs {
		if j.ps != nil {
			m.doneLocked(j)
		}
	}
}

func (m *marks) doneLocked(j *job) {
	ps, p := j.ps, j.pub
	ps.pending--
	p.queued--
	if ps.pending == 0 || p.queued == 0 {
		m.settled.Broadcast()
	}
	m.forgetLocked(ps)
}

// remember adds a committed range to ps's dedupe window, making ps the most
// recently active id; the least recently active id beyond the cache bound
// loses its window (its duplicates are then answered with null offsets).
func (m *marks) remember(ps *pubState, r seqRange) {
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
	if len(ps.window) < dedupeWindow {
		ps.window = append(ps.window, r)
		return
	}
	ps.window[ps.head] = r
	ps.head = (ps.head + 1) % dedupeWindow
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

// decodeSeq splits an exactly-once frame, [seq, row] or [seq, [rows…]], and
// validates its rows. On failure it returns the reply's error code and detail.
func (p *publisher) decodeSeq(rows [][]byte, data []byte) (int64, [][]byte, string, string) {
	const shape = "a publisher with an id sends [seq, row] or [seq, [rows…]], seq being the number of the frame's first row"
	b := trimSpace(data)
	if len(b) == 0 {
		return 0, nil, wire.ReplyBadFrame, "publish frame is empty; " + shape
	}
	if b[0] != '[' {
		return 0, nil, wire.ReplyBadFrame, "publish frame is " + jsonKind(b[0]) + " without a seq; " + shape
	}
	elems, err := splitArray(b)
	if err != nil {
		return 0, nil, wire.ReplyBadFrame, "publish frame is not JSON: " + err.Error()
	}
	if len(elems) == 0 || elems[0][0] == '{' || elems[0][0] == '[' {
		return 0, nil, wire.ReplyBadFrame, "publish frame has no seq; " + shape
	}
	if len(elems) != 2 {
		return 0, nil, wire.ReplyBadFrame, fmt.Sprintf("publish frame has %d elements; %s", len(elems), shape)
	}
	seq, err := strconv.ParseInt(string(elems[0]), 10, 64)
	if err != nil || seq < 1 {
		return 0, nil, wire.ReplyBadFrame, fmt.Sprintf("seq %.30s is not a whole number ≥ 1 (a fresh publisher id starts at 1; resume from the greeting's last_seq + 1)", elems[0])
	}
	rows, code, detail := p.decode(rows, elems[1])
	if code != "" {
		return 0, nil, code, detail
	}
	if seq > 1<<62-int64(len(rows)) {
		return 0, nil, wire.ReplyBadFrame, fmt.Sprintf("seq %d is too large; seqs stay below 2^62", seq)
	}
	return seq, rows, "", ""
}

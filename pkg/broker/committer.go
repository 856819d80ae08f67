package broker

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/wire"
)

// maxGroupRows caps the rows one group commit takes, so one transaction stays
// short and the frames of a group reach subscribers promptly.
const maxGroupRows = 10000

// job is one publish frame waiting for the committer: its rows (canonical
// bytes, validated on the publisher's goroutine) and where its reply goes.
type job struct {
	rows [][]byte
	one  [1][]byte // storage for rows of a one-row frame
	// arena holds the canonical bytes of rows (pubDecoder.DecodeTo);
	// a recycled job reuses it (see publisher.free).
	arena []byte
	pub   *publisher
	slot  replySlot // the frame's reply, in the job: one allocation per frame, not two

	// answer is the reply the deliverer built for this frame, on its way
	// to the publisher's slot (see publisher.answerJobs).
	answer []byte

	// eo is an exactly-once frame's state (zero on a plain one); see
	// marks.go.
	eo markedFrame
	// read is when the frame was read, for the ack latency metric; zero
	// when metrics are disabled.
	read time.Time
	// done takes the answer of an HTTP publish (pub is nil): the request
	// waits on it (httppublish.go).
	done chan []byte
}

// committed is a group the committer appended (or failed to), on its way to
// the deliverer.
type committed struct {
	jobs  []*job
	rows  [][]byte // the rows appended (those of jobs admit failed are not)
	taken int      // rows taken from the inbox, to give back
	first int64
	ts    int64
	err   error
}

// commit runs a durable stream's committer until its inbox is closed and
// drained: take what is queued and append it in one transaction (fsync),
// then hand the group to the deliverer, which under the fan-out lock
// advances the frontier and offers the frames, then answers each publisher
// in the order it sent (I3: commit, fan out, ack). The hand-off is one FIFO,
// so groups are delivered in commit order (I1), and the next group's fsync
// overlaps the previous group's fan-out. A group of one publisher's frames,
// with no subscriber to fan out to and no group ahead of it, is answered by
// the committer itself: the hand-off would cost more than it overlaps
// (docs/design.md §3.1). On an exactly-once stream the publishers' marks go
// into the same transaction as their rows.
func (s *stream) commit() {
	groups := make(chan committed, 2)
	// spare carries a delivered group's slices back to the committer for
	// reuse, so a group allocates no job list or row list of its own. It
	// holds more than the groups in flight, so the deliverer never waits
	// on it.
	spare := make(chan committed, 4)
	done := make(chan struct{})
	// queued counts the groups handed to the deliverer and not yet
	// delivered. At zero the committer may deliver a group itself: no
	// group can then be ahead of it (I1).
	var queued atomic.Int32
	deliver := func(g committed, d *delivery) {
		s.deliverGroup(g, d)
		clear(g.jobs)
		clear(g.rows)
		select {
		case spare <- committed{jobs: g.jobs[:0], rows: g.rows[:0]}:
		default:
		}
	}
	go func() {
		defer close(done)
		var d delivery
		for g := range groups {
			deliver(g, &d)
			queued.Add(-1)
		}
	}()
	var own delivery // the committer's scratch for the groups it delivers itself
	defer func() {
		close(groups)
		<-done
	}()
	// The committer is the log's one appender (I7), so it knows the offset
	// the next group starts at; exactly-once marks carry their row's offset
	// into the transaction that writes it.
	s.mu.Lock()
	next := s.end
	s.mu.Unlock()
	var marks []logstore.Mark
	for {
		var reuse committed
		select {
		case reuse = <-spare:
		default:
		}
		jobs := s.inbox.Take(s.cfg.GroupCommit, maxGroupRows, reuse.jobs)
		if jobs == nil {
			return
		}
		taken := 0
		for _, j := range jobs {
			taken += len(j.rows)
		}
		if s.marks != nil {
			marks = s.marks.Admit(jobs, next, marks)
		}
		rows := reuse.rows
		if cap(rows) < taken {
			rows = make([][]byte, 0, taken)
		}
		for _, j := range jobs {
			if !j.eo.Failed() {
				rows = append(rows, j.rows...)
			}
		}
		ts := s.srv.opts.Clock.Now().UnixMicro()
		var first int64
		var err error
		if len(rows) > 0 {
			// Never cancelled: rows accepted before a shutdown are committed
			// and acknowledged during it.
			var began time.Time
			if s.m != nil {
				began = time.Now()
			}
			first, err = s.appendGroup(context.Background(), rows, ts, marks)
			if s.m != nil && err == nil {
				s.m.CommitLatency.Observe(time.Since(began))
			}
			switch {
			case err != nil:
				if s.marks != nil {
					s.marks.Rollback(jobs)
				}
			case first != next && len(marks) > 0:
				// Cannot happen with one appender; if it does, the marks
				// just stored carry wrong offsets (their seqs are right).
				s.srv.logger.Error("the log assigned another offset than the committer expected; "+
					"exactly-once marks of this group carry wrong last_offset values",
					"stream", s.name, "expected", next, "got", first)
			}
			if err == nil {
				next = first + int64(len(rows))
			}
		}
		g := committed{jobs: jobs, rows: rows, taken: taken, first: first, ts: ts, err: err}
		if queued.Load() == 0 && s.subscribers.Load() == 0 && onePublisher(jobs) {
			// Nothing to fan out, one write of replies, nothing ahead:
			// answering the group here costs less than waking the
			// deliverer, whose only gain is overlapping the answers with
			// the next fsync (a profile of a single-row
			// publisher). Several publishers' writes are left to overlap.
			deliver(g, &own)
			continue
		}
		queued.Add(1)
		groups <- g
	}
}

// onePublisher reports whether every job of a group came from one
// publisher connection.
func onePublisher(jobs []*job) bool {
	for _, j := range jobs {
		if j.pub != jobs[0].pub {
			return false
		}
	}
	return true
}

// appendGroup commits one group to the log, through the server's test
// hook when it has one (Options.appendHook).
func (s *stream) appendGroup(ctx context.Context, rows [][]byte, ts int64, marks []logstore.Mark) (int64, error) {
	if hook := s.srv.opts.appendHook; hook != nil {
		return hook(ctx, s.log, rows, ts, marks)
	}
	return s.log.Append(ctx, rows, ts, marks)
}

// encodeIfWatched encodes the frames of rows for the fan-out when the
// stream has a subscriber, outside the fan-out lock; with none it returns
// nil, and deliverStamped encodes under the lock only if one attached
// meanwhile. A publisher nobody subscribes to then pays no encoding.
func (s *stream) encodeIfWatched(rows [][]byte, first, ts int64) [][]byte {
	if s.subscribers.Load() == 0 {
		return nil
	}
	return wire.EncodeDataFrames(rows, first, ts)
}

// delivery is the deliverer goroutine's scratch space, reused across
// groups.
type delivery struct {
	replies [][]byte     // exactly-once answers, by job
	pubs    []*publisher // the publishers answered in this group
	marked  []*job       // the group's exactly-once jobs, settled after answering
}

// deliverGroup fans a committed group out and acknowledges it (or answers
// commit_failed for every frame of a group that failed). Each publisher's
// replies of the group are queued at once, so its writer sends them with
// one write rather than one per frame.
func (s *stream) deliverGroup(g committed, d *delivery) {
	failed := ""
	if g.err != nil {
		// Keyed by stream: one line per stream and interval, with a count,
		// however many groups fail (every one does on a full disk).
		s.srv.commitErrs.Error(context.Background(), s.name, "commit failed", "stream", s.name, "rows", len(g.rows), "err", g.err)
		// The log above keeps the paths; the publisher is told the cause.
		failed = "the server could not commit these rows (" + publicDetail(g.err) + "); nothing was committed, so sending them again is safe"
	} else if len(g.rows) > 0 {
		s.srv.commitErrs.Recovered(context.Background(), s.name, "commits succeed again", "stream", s.name)
		if m := s.m; m != nil {
			// Before the fan-out: a client that saw a row sees it counted.
			m.RowsCommitted.Add(int64(len(g.rows)))
			m.CommitGroups.Add(1)
		}
		s.deliverStamped(s.encodeIfWatched(g.rows, g.first, g.ts), g.rows, g.first, g.first+int64(len(g.rows)), g.ts)
	}
	s.observeAcks(g.jobs)
	if s.marks == nil {
		if failed != "" {
			// Immutable once built: every frame of the group shares it.
			reply := wire.ErrorReplyFrame(wire.ReplyCommitFailed, failed)
			for _, j := range g.jobs {
				j.answer = reply
			}
		} else {
			// Sized for the offsets of the group's end, so the acks share
			// one allocation.
			room := 0
			for _, j := range g.jobs {
				room += wire.OKReplyFrameRoom(g.first+int64(len(g.rows)), len(j.rows))
			}
			off := g.first
			buf := make([]byte, 0, room)
			for _, j := range g.jobs {
				buf, j.answer = wire.AppendOKReplyFrame(buf, off, len(j.rows))
				off += int64(len(j.rows))
				if j.pub != nil {
					j.pub.c.rows.Add(int64(len(j.rows))) // the publisher's rows, for the access log
				}
			}
		}
		d.pubs = answerJobs(g.jobs, d.pubs)
		s.inbox.Release(g.taken)
		return
	}
	if cap(d.replies) < len(g.jobs) {
		d.replies = make([][]byte, len(g.jobs))
	}
	replies := d.replies[:len(g.jobs)]
	s.marks.Record(g.jobs, g.first, failed, func(i int, a markAnswer) { replies[i] = answerFrame(a) })
	marked := d.marked[:0]
	for i, j := range g.jobs {
		j.answer = replies[i]
		if failed == "" && j.eo.failed == "" && j.pub != nil {
			j.pub.c.rows.Add(int64(len(j.rows))) // a duplicate's rows were trimmed: 0
		}
		if j.MarkFrame().Marked() {
			marked = append(marked, j)
		}
	}
	// Once answered, a plain publisher's job may be recycled for its next
	// frame at once, so only the marked jobs, which are never recycled, are
	// touched after answerJobs.
	d.pubs = answerJobs(g.jobs, d.pubs)
	// Settled only once answered: a superseded connection's replies are then
	// queued ahead of its 4409.
	s.marks.Done(marked)
	clear(marked)
	d.marked = marked[:0]
	clear(replies)
	s.inbox.Release(g.taken)
}

// answerJobs hands each job's answer to its publisher, one call per
// publisher for all of its jobs in the group. pubs is scratch space,
// returned for reuse. Only the stream's deliverer calls it (it owns every
// publisher's answered list).
func answerJobs(jobs []*job, pubs []*publisher) []*publisher {
	for _, j := range jobs {
		p := j.pub
		if p == nil {
			j.done <- j.answer // an HTTP publish: its channel has room for it
			continue
		}
		if len(p.answered) == 0 {
			pubs = append(pubs, p)
		}
		p.answered = append(p.answered, j)
	}
	for _, p := range pubs {
		p.answerJobs()
	}
	clear(pubs)
	return pubs[:0]
}

// observeAcks records the ack latency of a group's frames, from each
// frame's read to now, when its reply is about to be queued: one clock
// read per group.
func (s *stream) observeAcks(jobs []*job) {
	if s.m == nil {
		return
	}
	now := time.Now()
	for _, j := range jobs {
		if !j.read.IsZero() {
			s.m.AckLatency.Observe(now.Sub(j.read))
		}
	}
}

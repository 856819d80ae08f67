package broker

import (
	"context"
	"sync"

	"github.com/streamcast/streamcast/pkg/broker/frame"
	"github.com/streamcast/streamcast/pkg/broker/marks"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/wire"
)

// maxGroupRows caps the rows one group commit takes, so one transaction stays
// short and the frames of a group reach subscribers promptly.
const maxGroupRows = 10000

// job is one publish frame waiting for the committer: its rows (canonical
// bytes, validated on the publisher's goroutine) and where its reply goes.
type job struct {
	rows  [][]byte
	one   [1][]byte // storage for rows of a one-row frame
	pub   *publisher
	reply *replySlot

	// eo is an exactly-once frame's state (zero on a plain one); see
	// package marks.
	eo marks.Frame
}

// inbox holds the jobs of a durable stream until its committer takes them.
// rows counts the rows queued or being committed, bounded by max_inbound.
type inbox struct {
	mu       sync.Mutex
	nonEmpty sync.Cond // the committer waits for jobs
	room     sync.Cond // publishers wait for room under max_inbound
	jobs     []*job
	rows     int
	max      int
	peak     int  // the most rows ever queued: max_inbound bounds it (tests observe the bound through it)
	closed   bool // no more jobs: the committer drains and exits
	stopping bool // shutdown: publishers stop waiting for room
}

func (in *inbox) init(max int) {
	in.nonEmpty.L = &in.mu
	in.room.L = &in.mu
	in.max = max
}

// put queues j, waiting while the stream holds max_inbound rows (a frame
// larger than the bound goes alone, when the inbox is empty). It reports false
// when the inbox is closed.
func (in *inbox) put(j *job) bool {
	n := len(j.rows)
	in.mu.Lock()
	defer in.mu.Unlock()
	for !in.closed && !in.stopping && in.rows > 0 && in.rows+n > in.max {
		in.room.Wait()
	}
	if in.closed {
		return false
	}
	in.jobs = append(in.jobs, j)
	in.rows += n
	in.peak = max(in.peak, in.rows)
	in.nonEmpty.Signal()
	return true
}

// take waits for jobs and returns them: everything queued (up to
// maxGroupRows, at least one job) with group commit, else one job. It returns
// nil once the inbox is closed and empty.
func (in *inbox) take(group bool, dst []*job) []*job {
	in.mu.Lock()
	defer in.mu.Unlock()
	for len(in.jobs) == 0 && !in.closed {
		in.nonEmpty.Wait()
	}
	if len(in.jobs) == 0 {
		return nil
	}
	k := 1
	if group {
		rows := len(in.jobs[0].rows)
		for k < len(in.jobs) && rows+len(in.jobs[k].rows) <= maxGroupRows {
			rows += len(in.jobs[k].rows)
			k++
		}
	}
	dst = append(dst[:0], in.jobs[:k]...)
	rest := copy(in.jobs, in.jobs[k:])
	clear(in.jobs[rest:])
	in.jobs = in.jobs[:rest]
	return dst
}

// release gives back the room of n committed (or failed) rows.
func (in *inbox) release(n int) {
	in.mu.Lock()
	in.rows -= n
	in.room.Broadcast()
	in.mu.Unlock()
}

// close stops the inbox: queued jobs are still taken, new ones refused.
func (in *inbox) close() {
	in.mu.Lock()
	in.closed = true
	in.nonEmpty.Broadcast()
	in.room.Broadcast()
	in.mu.Unlock()
}

// stop releases publishers waiting for room (shutdown: what they hold is
// accepted and committed, the bound notwithstanding).
func (in *inbox) stop() {
	in.mu.Lock()
	in.stopping = true
	in.room.Broadcast()
	in.mu.Unlock()
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
// overlaps the previous group's fan-out. On an exactly-once stream the
// publishers' marks go into the same transaction as their rows.
func (s *stream) commit() {
	groups := make(chan committed, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var replies [][]byte
		for g := range groups {
			replies = s.deliverGroup(g, replies)
		}
	}()
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
		jobs := s.inbox.take(s.cfg.GroupCommit, nil)
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
		rows := make([][]byte, 0, taken)
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
			first, err = s.appendGroup(context.Background(), rows, ts, marks)
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
		groups <- committed{jobs: jobs, rows: rows, taken: taken, first: first, ts: ts, err: err}
	}
}

// appendGroup commits one group to the log, through the server's test
// hook when it has one (Options.appendHook).
func (s *stream) appendGroup(ctx context.Context, rows [][]byte, ts int64, marks []logstore.Mark) (int64, error) {
	if hook := s.srv.opts.appendHook; hook != nil {
		return hook(ctx, s.log, rows, ts, marks)
	}
	return s.log.Append(ctx, rows, ts, marks)
}

// deliverGroup fans a committed group out and acknowledges it (or answers
// commit_failed for every frame of a group that failed). replies is scratch
// space, returned for reuse.
func (s *stream) deliverGroup(g committed, replies [][]byte) [][]byte {
	failed := ""
	if g.err != nil {
		// Keyed by stream: one line per stream and interval, with a count,
		// however many groups fail (every one does on a full disk).
		s.srv.commitErrs.Error(context.Background(), s.name, "commit failed", "stream", s.name, "rows", len(g.rows), "err", g.err)
		failed = "the server could not commit these rows (" + g.err.Error() + "); nothing was committed, so sending them again is safe"
	} else if len(g.rows) > 0 {
		s.srv.commitErrs.Recovered(context.Background(), s.name, "commits succeed again", "stream", s.name)
		frames := frame.Encode(g.rows, g.first, g.ts)
		s.deliver(frames, g.rows, g.first, g.first+int64(len(g.rows)))
	}
	if s.marks == nil {
		off := g.first
		for _, j := range g.jobs {
			if failed != "" {
				j.pub.resolve(j.reply, frame.ErrorReply(wire.ReplyCommitFailed, failed))
				continue
			}
			j.pub.resolve(j.reply, frame.OKReply(off, len(j.rows)))
			off += int64(len(j.rows))
		}
		s.inbox.release(g.taken)
		return replies
	}
	if cap(replies) < len(g.jobs) {
		replies = make([][]byte, len(g.jobs))
	}
	replies = replies[:len(g.jobs)]
	s.marks.Record(g.jobs, g.first, failed, func(i int, a marks.Answer) { replies[i] = answerFrame(a) })
	for i, j := range g.jobs {
		j.pub.resolve(j.reply, replies[i])
	}
	// Settled only once answered: a superseded connection's replies are then
	// queued ahead of its 4409.
	s.marks.Done(g.jobs)
	clear(replies)
	s.inbox.release(g.taken)
	return replies
}

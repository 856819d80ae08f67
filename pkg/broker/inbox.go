package broker

import "sync"

// commitInbox holds the jobs of a durable stream, of type J, until its committer
// takes them. Its rows count the rows queued or being committed, bounded
// by max_inbound. Init it before use; safe for concurrent use.
type commitInbox[J any] struct {
	mu       sync.Mutex
	nonEmpty sync.Cond // the committer waits for jobs
	room     sync.Cond // publishers wait for room under max_inbound
	jobs     []entry[J]
	rows     int
	max      int
	closed   bool // no more jobs: the committer drains and exits
	stopping bool // shutdown: publishers stop waiting for room

	// waiting, when set (tests only), is called with mu held each time a
	// Put is about to wait for room: a test sees the wait itself rather
	// than guessing it from a Put that has not returned yet.
	waiting func()
	// queued, when set (tests only), is called with mu held after each
	// Put with the rows then queued: a test follows the most rows ever
	// queued at once, which max_inbound bounds.
	queued func(rows int)
}

// entry is a queued job and its row count.
type entry[J any] struct {
	job  J
	rows int
}

// Init readies in to hold up to max rows (max_inbound).
func (in *commitInbox[J]) Init(max int) {
	in.nonEmpty.L = &in.mu
	in.room.L = &in.mu
	in.max = max
}

// Put queues j, which holds rows rows, waiting while the inbox holds max
// rows (a job larger than the bound goes alone, when the inbox is empty).
// It reports false when the inbox is closed.
func (in *commitInbox[J]) Put(j J, rows int) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	for !in.closed && !in.stopping && in.rows > 0 && in.rows+rows > in.max {
		if in.waiting != nil {
			in.waiting()
		}
		in.room.Wait()
	}
	if in.closed {
		return false
	}
	in.jobs = append(in.jobs, entry[J]{j, rows})
	in.rows += rows
	if in.queued != nil {
		in.queued(in.rows)
	}
	in.nonEmpty.Signal()
	return true
}

// Take waits for jobs and appends them to dst[:0]: with group, everything
// queued up to maxRows rows (at least one job), else one job. It returns
// nil once the inbox is closed and empty. Their room stays taken until
// Release.
func (in *commitInbox[J]) Take(group bool, maxRows int, dst []J) []J {
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
		rows := in.jobs[0].rows
		for k < len(in.jobs) && rows+in.jobs[k].rows <= maxRows {
			rows += in.jobs[k].rows
			k++
		}
	}
	dst = dst[:0]
	for _, e := range in.jobs[:k] {
		dst = append(dst, e.job)
	}
	rest := copy(in.jobs, in.jobs[k:])
	clear(in.jobs[rest:])
	in.jobs = in.jobs[:rest]
	return dst
}

// Release gives back the room of n committed (or failed) rows.
func (in *commitInbox[J]) Release(n int) {
	in.mu.Lock()
	in.rows -= n
	in.room.Broadcast()
	in.mu.Unlock()
}

// Close stops the inbox: queued jobs are still taken, new ones refused.
func (in *commitInbox[J]) Close() {
	in.mu.Lock()
	in.closed = true
	in.nonEmpty.Broadcast()
	in.room.Broadcast()
	in.mu.Unlock()
}

// Reopen takes jobs again after Close, for a committer started over; the
// previous one has returned.
func (in *commitInbox[J]) Reopen() {
	in.mu.Lock()
	in.closed, in.stopping = false, false
	in.mu.Unlock()
}

// Stop releases publishers waiting for room (shutdown: what they hold is
// accepted and committed, the bound notwithstanding).
func (in *commitInbox[J]) Stop() {
	in.mu.Lock()
	in.stopping = true
	in.room.Broadcast()
	in.mu.Unlock()
}

// Rows is how many rows are queued or being committed now.
func (in *commitInbox[J]) Rows() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.rows
}

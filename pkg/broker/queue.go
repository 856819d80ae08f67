package broker

// frameQueue is a connection's outbound data frames, in order: those waiting
// for the writer and those it is writing now. A frame leaves the queue only
// once the kernel has taken it, so len counts queued and in-write frames
// alike, and a subscriber's max_backlog bounds both together (I5): were
// the writer to take the whole queue as its batch, the subscriber could
// queue another max_backlog frames behind it, up to twice the bound.
//
// It is a ring over one slice that grows by doubling up to a limit (a
// subscriber's max_backlog), so a stalled subscriber holds one array of at
// most max_backlog slice headers, and it is let go once the queue drains, so
// a burst's memory goes back with the burst. Slots are cleared as frames
// leave: a written frame's bytes (and the group arena they share, see
// wire.EncodeDataFrames) are never pinned by a stale slot.
//
// frameQueue is not safe for concurrent use: the connection that owns it guards
// it with its own lock. The zero value is an empty queue.
type frameQueue struct {
	buf  [][]byte // ring storage; len(buf) is the capacity
	head int      // index of the oldest frame
	n    int      // frames in the queue
}

// keptCap is the largest ring a drained queue keeps for its next burst;
// a larger one is let go (an idle connection then holds no burst's memory).
const keptCap = 1024

// Len is the number of frames queued or being written.
func (q *frameQueue) Len() int { return q.n }

// Push appends f. limit, when > 0, caps how far the ring grows at once (a
// subscriber never holds more than max_backlog frames, so its ring never
// needs more slots); the ring still grows past it when it must.
func (q *frameQueue) Push(f []byte, limit int) {
	if q.n == len(q.buf) {
		q.grow(limit)
	}
	i := q.head + q.n
	if i >= len(q.buf) {
		i -= len(q.buf)
	}
	q.buf[i] = f
	q.n++
}

func (q *frameQueue) grow(limit int) {
	c := max(2*len(q.buf), 16)
	if limit > 0 && c > limit {
		c = max(limit, q.n+1)
	}
	buf := make([][]byte, c)
	if q.n > 0 {
		k := copy(buf, q.buf[q.head:min(q.head+q.n, len(q.buf))])
		copy(buf[k:], q.buf[:q.n-k])
	}
	q.buf, q.head = buf, 0
}

// Peek copies up to len(dst) of the oldest frames into dst and returns how
// many; they stay in the queue until Pop.
func (q *frameQueue) Peek(dst [][]byte) int {
	k := min(len(dst), q.n)
	if k == 0 {
		return 0
	}
	m := copy(dst[:k], q.buf[q.head:min(q.head+k, len(q.buf))])
	copy(dst[m:k], q.buf[:k-m])
	return k
}

// Pop removes the k oldest frames, clearing their slots, and lets a large
// ring go once the queue is empty. It returns the bytes of the ring it let
// go, or 0.
func (q *frameQueue) Pop(k int) (released int64) {
	k = min(k, q.n)
	end := q.head + k
	if end <= len(q.buf) {
		clear(q.buf[q.head:end])
	} else {
		clear(q.buf[q.head:])
		clear(q.buf[:end-len(q.buf)])
	}
	q.n -= k
	q.head = end
	if q.head >= len(q.buf) {
		q.head -= len(q.buf)
	}
	if q.n == 0 {
		q.head = 0
		if len(q.buf) > keptCap {
			released = int64(len(q.buf)) * slotBytes
			q.buf = nil
		}
	}
	return released
}

// slotBytes is the size of one ring slot (a slice header).
const slotBytes = 24

// Bytes is the memory the queue pins: its slots and the frames in them
// (frames shared with other connections are counted here too).
func (q *frameQueue) Bytes() int64 {
	total := int64(len(q.buf)) * slotBytes
	for i := 0; i < q.n; i++ {
		j := q.head + i
		if j >= len(q.buf) {
			j -= len(q.buf)
		}
		total += int64(len(q.buf[j]))
	}
	return total
}

// Reset empties the queue and lets its storage go.
func (q *frameQueue) Reset() {
	*q = frameQueue{}
}

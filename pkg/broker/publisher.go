package broker

import (
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/wire"
)

// replySlot is the reply owed for one publish frame. Slots are answered in
// the order their frames arrived, whatever order they are resolved in.
type replySlot struct {
	frame []byte // the complete reply frame, once resolved
	done  bool
	// reuse is the job the slot is part of when the publisher recycles
	// that job once the slot's reply is queued (see publisher.free).
	reuse *job
}

// publisher is one publishing connection. Its reader goroutine validates each
// frame (schema.Decode, never on the committer) and queues it; replies go out
// in send order through the connection's writer.
type publisher struct {
	c   *wsConn
	st  *stream
	max int // max_in_flight

	// Exactly-once connections (id != ""): eo is set by claim and read by
	// this connection's goroutines.
	id string
	eo *markHolder

	gen int64 // st's log generation it was built in (see attached.AddReader)

	mu         sync.Mutex
	cond       sync.Cond    // the reader waits for in-flight room; shutdown waits for owed == 0
	slots      []*replySlot // replies owed and not yet queued, in send order
	ready      [][]byte     // scratch for queueing resolved replies
	owed       int          // frames queued or owed and not yet written (the greeting counts until written)
	stop       bool         // shutdown: read no more frames
	superseded bool         // a newer connection took the publisher id: read no more frames
	connDead   bool         // the writer failed: owed will never drain

	// owedHook, when set (tests only), is called with mu held each time a
	// frame read makes a reply owed, with the replies then owed: a test
	// follows the most ever owed, which max_in_flight bounds.
	owedHook func(owed int)

	dec pubDecoder // reused across frames
	buf []byte     // reused read buffer

	// free is jobs whose replies are queued, for the reader's next frames:
	// a single-row publisher then allocates no job per frame. Only plain
	// publishers of durable streams recycle: once a plain job's reply is
	// queued, nothing else refers to it (the committer and the deliverer
	// are done with it; exactly-once jobs stay referenced by package
	// marks). Guarded by mu.
	free []*job

	// answered is the jobs of this publisher whose answers the stream's
	// deliverer has built in the group it delivers; only the deliverer
	// touches it (answerJobs).
	answered []*job
}

// newPublisher makes c a publisher connection of st; id is its exactly-once
// publisher id ("" for a plain publisher).
func newPublisher(c *wsConn, st *stream, id string) *publisher {
	// owed starts at 1: the greeting counts until it is written.
	p := &publisher{c: c, st: st, max: st.limits.MaxInFlight, owed: 1, id: id, gen: st.life.Generation(), dec: pubDecoder{Schema: st.sch}}
	p.cond.L = &p.mu
	c.pub = p
	c.afterWrite = p.written
	c.onDead = p.dead
	return p
}

// publish serves a publisher connection until it ends. Its connection is
// tracked and registered; the caller finishes it.
func (srv *Server) publish(p *publisher) {
	c, st := p.c, p.st
	st.publishers.Add(1)
	defer st.publishers.Add(-1)

	if !st.life.AddReader(p.gen) {
		c.close(wire.CloseGoingAway, st.life.GoingAway())
		return
	}
	var mark *wire.PublisherMark
	if p.id != "" {
		m, ok := p.claim()
		defer st.marks.Release(p.eo)
		if !ok {
			st.life.ReaderDone()
			c.close(wire.CloseSuperseded, (&wire.Superseded{Publisher: p.id}).Reason())
			return
		}
		mark = &m
	}
	end := wire.Null
	if st.cfg.Durable {
		end = st.endOffset.Load()
	}
	c.enqueue(st.greetingWith(end, nil, nil, mark))
	stopping := p.readFrames()
	st.life.ReaderDone()

	switch {
	case stopping:
		// Shutdown: every frame read so far is committed and answered
		// before the 1001 (the committer drains after every reader stopped).
		p.waitOwed(30 * time.Second)
		c.close(wire.CloseGoingAway, st.life.GoingAway())
	case p.isSuperseded():
		// The frames this connection queued are answered first, then 4409:
		// its peer learns exactly which of them landed.
		st.marks.WaitQueued(p.eo)
		c.close(wire.CloseSuperseded, (&wire.Superseded{Publisher: p.id}).Reason())
	}
}

// claim takes p's publisher id for this connection, superseding the
// connection that held it, and waits until every frame queued under the id
// is committed or failed, so the mark it returns for the greeting counts
// them. It reports false when a newer connection took the id meanwhile.
func (p *publisher) claim() (wire.PublisherMark, bool) {
	marks := p.st.marks
	p.eo = marks.Claim(p.id, p.supersede)
	// Not reading the socket while settling: keepalive must not take the
	// unread pongs for a dead peer.
	p.c.holding.Store(true)
	defer p.c.holding.Store(false)
	return marks.Settle(p.eo)
}

// supersede stops the reader of a connection whose publisher id a newer
// connection took: it reads no further frame.
func (p *publisher) supersede() {
	p.mu.Lock()
	p.superseded = true
	p.cond.Broadcast()
	p.mu.Unlock()
	_ = p.c.nc.SetReadDeadline(time.Now())
}

func (p *publisher) isSuperseded() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.superseded
}

// readFrames reads and handles publish frames until the connection ends or
// the server stops (reported true).
//
// At max_in_flight the reader stops with the next frame read and not yet
// handled, rather than before reading it. A client whose own window is
// max_in_flight (the Go client's default) sends that frame only once a
// reply has reached it, so by then there is room, and the reader wakes
// once per burst (for the socket) instead of twice (for the room, then for
// the socket): a profile counted 1.4 futex calls per commit group before
// and 0.45 after. The frame in hand is one the socket would have held; if
// the connection ends first, it is never answered, as it would not have
// been.
func (p *publisher) readFrames() (stopping bool) {
	c := p.c
	limit := p.st.limits.MaxMessageBytes
	for {
		if stop, dead := p.waitRoom(false); stop || dead {
			return stop
		}
		typ, r, err := c.ws.NextReader()
		if err != nil {
			return p.stopped()
		}
		c.reads.Add(1)
		data, tooBig, err := readPubMessage(r, p.buf, limit)
		p.buf = data[:0]
		if err != nil {
			return p.stopped()
		}
		if tooBig {
			reason := wire.CloseReason("too_big", wire.Field{Key: "max_message_bytes", Value: limit})
			c.close(wire.CloseTooBig, reason)
			return false
		}
		if stop, dead := p.waitRoom(true); stop || dead {
			return stop
		}
		p.handle(typ, data)
	}
}

// waitRoom reports whether the server is stopping or the connection is
// done (dead, superseded). With wait, it first waits while max_in_flight
// replies are owed, until one is written or either of those happens.
func (p *publisher) waitRoom(wait bool) (stop, dead bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if wait && p.owed >= p.max {
		p.c.holding.Store(true)
		for p.owed >= p.max && !p.stop && !p.connDead && !p.superseded {
			p.cond.Wait() // max_in_flight: stop reading this socket
		}
		p.c.holding.Store(false)
	}
	return p.stop, p.connDead || p.superseded
}

func (p *publisher) stopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stop
}

// handle validates one frame and queues it for commit (durable) or delivers
// it (live-only); a frame that is not a row or whose rows the schema refuses
// is answered at once and commits nothing. The connection stays open.
func (p *publisher) handle(typ int, data []byte) {
	st := p.st
	var read time.Time
	if st.m != nil {
		read = time.Now()
	}
	var j *job
	var slot *replySlot
	p.mu.Lock()
	if st.log != nil {
		j = p.newJobLocked(read)
		slot = &j.slot
	} else {
		slot = &replySlot{}
	}
	p.slots = append(p.slots, slot)
	p.owed++
	if p.owedHook != nil {
		p.owedHook(p.owed)
	}
	p.mu.Unlock()

	if typ != websocket.TextMessage {
		p.resolve(slot, wire.ErrorReplyFrame(wire.ReplyBadFrame, "publish frames are text frames of JSON; this one is binary"))
		return
	}
	var rows [][]byte
	var seq int64
	var code, detail string
	if j != nil {
		seq, rows, j.arena, code, detail = p.dec.DecodeTo(j.one[:0], j.arena[:0], data, p.eo != nil)
	} else {
		seq, rows, code, detail = p.dec.Decode(nil, data, p.eo != nil)
	}
	if code != "" {
		p.resolve(slot, wire.ErrorReplyFrame(code, detail))
		return
	}
	if p.eo != nil {
		v, queue, a := st.marks.Judge(p.eo, &j.eo, seq, rows)
		switch v {
		case Reply:
			p.resolve(slot, answerFrame(a))
			return
		case Drop:
			p.resolve(slot, nil)
			return
		}
		j.rows = queue
	} else if j != nil {
		j.rows = rows
	}
	if j != nil {
		p.c.holding.Store(true) // put may wait for room under max_inbound
		ok := st.inbox.Put(j, len(j.rows))
		p.c.holding.Store(false)
		if !ok {
			p.resolve(slot, wire.ErrorReplyFrame(wire.ReplyCommitFailed, "the server is stopping this stream; nothing was committed, so sending these rows again is safe"))
			if j.eo.Marked() {
				st.marks.Unqueue(j)
			}
		}
		return
	}
	ts := st.srv.opts.Clock.Now().UnixMicro()
	if st.m != nil {
		st.m.RowsCommitted.Add(int64(len(rows)))
	}
	st.deliverStamped(st.encodeIfWatched(rows, wire.Null, ts), rows, wire.Null, wire.Null, ts)
	p.c.rows.Add(int64(len(rows)))
	if st.m != nil {
		st.m.AckLatency.Observe(time.Since(read))
	}
	p.resolve(slot, wire.OKReplyFrame(wire.Null, len(rows)))
}

// newJobLocked returns a job for the next frame, a recycled one when p
// has one; p.mu is held.
func (p *publisher) newJobLocked(read time.Time) *job {
	if n := len(p.free); n > 0 {
		j := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		j.read = read
		return j
	}
	j := &job{pub: p, read: read}
	if p.eo == nil {
		j.slot.reuse = j
	}
	return j
}

// maxKeptArena bounds the row storage a recycled job keeps, so a publisher
// that once sent a large frame does not pin max_in_flight copies of it.
const maxKeptArena = 64 << 10

// recycleLocked keeps j, whose reply is queued, for a later frame; p.mu is
// held. At most max_in_flight jobs are kept: no more are ever in use.
func (p *publisher) recycleLocked(j *job) {
	if len(p.free) >= p.max {
		return
	}
	arena := j.arena[:0]
	if cap(arena) > maxKeptArena {
		arena = nil
	}
	*j = job{pub: p, arena: arena}
	j.slot.reuse = j
	p.free = append(p.free, j)
}

// resolve answers slot and queues every reply now answerable in send order.
// A nil frame answers nothing (a superseded connection's frame, dropped: the
// 4409 that follows tells the peer).
func (p *publisher) resolve(slot *replySlot, frame []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	slot.frame, slot.done = frame, true
	p.queueAnsweredLocked(false)
}

// answerJobs answers the slots of p.answered with their jobs' answers and
// queues the replies now answerable, all with one lock and one hand-off to
// the writer: the replies of a commit group go out in one write.
//
// The caller (the committer or the deliverer) writes them itself when the
// connection's writer is idle (wsConn.enqueueClaiming), without waiting on
// the socket.
func (p *publisher) answerJobs() {
	p.mu.Lock()
	for _, j := range p.answered {
		j.slot.frame, j.slot.done = j.answer, true
		j.answer = nil
	}
	claimed := p.queueAnsweredLocked(true)
	p.mu.Unlock()
	clear(p.answered)
	p.answered = p.answered[:0]
	if claimed {
		// Outside p.mu: the write reports back through p.written.
		p.c.writeClaimed()
	}
}

// queueAnsweredLocked queues the replies of the answered slots at the head
// of p.slots, in send order; p.mu is held. With claim, it claims an idle
// socket for the caller rather than start a writer, and reports whether
// it did: the caller then calls p.c.writeClaimed once p.mu is released.
func (p *publisher) queueAnsweredLocked(claim bool) (claimed bool) {
	k := 0
	for k < len(p.slots) && p.slots[k].done {
		if f := p.slots[k].frame; f != nil {
			p.ready = append(p.ready, f)
		} else {
			p.owed--
			p.cond.Broadcast()
		}
		p.slots[k].frame = nil
		if j := p.slots[k].reuse; j != nil {
			p.recycleLocked(j)
		}
		k++
	}
	if k == 0 {
		return false
	}
	n := copy(p.slots, p.slots[k:])
	clear(p.slots[n:])
	p.slots = p.slots[:n]
	// Queued under p.mu so two resolvers (committer, reader) keep the order.
	if len(p.ready) > 0 {
		if claim {
			claimed = p.c.enqueueClaiming(p.ready...)
		} else {
			p.c.enqueue(p.ready...)
		}
	}
	clear(p.ready)
	p.ready = p.ready[:0]
	return claimed
}

// written is told by the writer how many frames went out.
func (p *publisher) written(n int) {
	p.mu.Lock()
	p.owed -= n
	p.cond.Broadcast()
	p.mu.Unlock()
}

// dead is told by the writer that the socket failed.
func (p *publisher) dead() {
	p.mu.Lock()
	p.connDead = true
	p.cond.Broadcast()
	p.mu.Unlock()
}

// fence stops the reader (shutdown): it reads no further frame.
func (p *publisher) fence() {
	p.mu.Lock()
	p.stop = true
	p.cond.Broadcast()
	p.mu.Unlock()
	_ = p.c.nc.SetReadDeadline(time.Now())
}

// waitOwed waits until every reply owed is written, the socket fails, or the
// timeout passes.
func (p *publisher) waitOwed(timeout time.Duration) {
	t := time.AfterFunc(timeout, func() {
		p.mu.Lock()
		p.connDead = true
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer t.Stop()
	p.mu.Lock()
	for p.owed > 0 && !p.connDead {
		p.cond.Wait()
	}
	p.mu.Unlock()
}

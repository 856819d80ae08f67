package broker

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// subscriber is one subscribing connection in a stream's fan-out set. Its
// queue is its connection's outbound queue, bounded by max_backlog frames (I5).
type subscriber struct {
	c          *wsConn
	st         *stream
	filter     *schema.Filter // nil: every row
	held       *schema.Filter // the hold on the server's filterCache to let go at detach; guarded by st.mu
	idx        int            // position in st.subs; -1 when detached; guarded by st.mu
	maxBacklog int
	// group is the compression group whose frames sub gets, nil while it
	// gets plain ones; waitIdx its place among the subscribers waiting to
	// join one, -1 when not waiting (deflate.go). Guarded by st.mu.
	group   *deflateGroup
	waitIdx int
	// deflateDeferred: sub has waited for a compressor the budget could
	// not give (counted once in deflateBudget.deferred).
	deflateDeferred bool
}

// offer queues the frames sub's filter takes (match nil: all of them). It
// never blocks: when the queue is full, sub keeps the contiguous prefix that
// fits and is closed with 4429 naming the offset to resume at (I5). Called
// under the stream's fan-out lock.
func (sub *subscriber) offer(frames [][]byte, match []bool, first, next int64) {
	c := sub.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead || c.closing != nil {
		return
	}
	// The queue counts the frames the writer is writing too: at most
	// max_backlog frames are held for sub, queued or in write (I5).
	room := sub.maxBacklog - c.out.Len()
	added := false
	for i, f := range frames {
		if match != nil && !match[i] {
			continue
		}
		if room <= 0 {
			resume, behind := wire.Null, wire.Null
			if first != wire.Null {
				resume = first + int64(i)
				behind = next - resume
			}
			c.closeLocked(wire.CloseTooSlow, (&wire.TooSlow{Offset: resume, Behind: behind}).Reason())
			// Its queue is let go once written or dropped: tell the
			// reclaimer (an estimate, O(1) under the fan-out lock).
			c.srv.reclaim.Note(int64(c.out.Len()) * int64(slotBytes+len(f)))
			// A subscriber that stopped reading may never take its prefix:
			// bound the wait so its connection ends.
			_ = c.nc.SetWriteDeadline(time.Now().Add(c.srv.opts.DropGrace))
			return
		}
		c.out.Push(f, sub.maxBacklog)
		room--
		added = true
	}
	if added && c.canStartLocked() {
		c.startWriterLocked()
	}
}

// subscribe attaches c to st (I2), greets it and starts the goroutine that
// replays [start, frontier) and then writes the live queue. It returns the
// subscriber to detach when the connection ends, or nil when the request was
// refused (c is closing). release lets go of the caller's hold on st
// (stream.hold): a replay keeps it until it has read the log. It takes the
// caller's hold on filter (filterCache.acquire): the subscriber lets go of
// it at detach, and subscribe itself when it returns nil.
func (srv *Server) subscribe(c *wsConn, st *stream, req replayRequest, filter *schema.Filter, where []byte, release func()) (got *subscriber) {
	sub := &subscriber{c: c, st: st, filter: filter, held: filter, idx: -1, waitIdx: -1, maxBacklog: st.limits.MaxBacklog}
	defer func() {
		if got == nil {
			st.detach(sub) // attached or not, its filter is let go
			release()      // a refused subscriber holds st no longer (a migration waits for every hold)
		}
	}()
	ext := replayExtent{Earliest: wire.Null, End: wire.Null, Start: 1}
	if req.Given && st.log != nil {
		var err error
		ext.Earliest, ext.End, err = st.log.Extent(c.ctx)
		if err != nil {
			srv.logger.Error("read log extent", "stream", st.name, "err", err)
			c.close(closeInternal, internalReason("the log could not be read; retry later"))
			return nil
		}
		ext.Start = st.log.Config().Start
		if req.Offset > 0 {
			if ext.HoleEnd, _, err = st.log.HoleEnd(c.ctx, req.Offset); err != nil {
				srv.logger.Error("read log holes", "stream", st.name, "err", err)
				c.close(closeInternal, internalReason("the log could not be read; retry later"))
				return nil
			}
		}
	}
	st.mu.Lock()
	frontier := st.end
	start, hasWindow, refusal := startReplay(req, st.cfg.Durable, ext, frontier, st.maxReplay(), replayHeld{})
	if refusal != nil && refusal.Why == wire.WhyTooOld && st.log != nil {
		// The offset distance refuses; count the rows actually held, from
		// the tier records, outside the fan-out lock (a count must never
		// stall publishers, I5), then decide again against the frontier
		// as it is then.
		st.mu.Unlock()
		from := max(req.Offset, ext.HoleEnd)
		if from == 0 {
			from = ext.Earliest
		}
		n, err := st.log.CountRows(c.ctx, from, frontier)
		if err != nil {
			srv.logger.Error("count the rows of a replay window", "stream", st.name, "from", from, "to", frontier, "err", err)
			c.close(closeInternal, internalReason("the log could not be read; retry later"))
			return nil
		}
		st.mu.Lock()
		held := replayHeld{From: from, To: frontier, N: n}
		frontier = st.end
		start, hasWindow, refusal = startReplay(req, st.cfg.Durable, ext, frontier, st.maxReplay(), held)
	}
	closing := false
	if refusal == nil {
		// The replay goroutine owns the socket until the replay is written;
		// frames offered meanwhile wait in the queue (counted against
		// max_backlog). Set under the fan-out lock, before any offer. A
		// connection already closing (its stream stopping) is not attached:
		// its writer owns the socket.
		c.mu.Lock()
		closing = c.closing != nil || c.dead
		if !closing {
			c.writing = true
			c.wg.Add(1)
		}
		c.mu.Unlock()
		if !closing {
			st.attachLocked(sub)
		}
	}
	st.mu.Unlock()
	if closing {
		return nil
	}
	if refusal != nil {
		c.close(refusal.Code(), refusal.Reason())
		return nil
	}

	var rg *wire.Range
	if hasWindow {
		rg = &wire.Range{Start: start, End: frontier}
		if st.log != nil && start < frontier {
			// A hole reaching up to the frontier (a restore's fence) holds
			// no row: the window ends where the rows do, so a reader
			// catching up does not wait for offsets that never were.
			end, err := st.log.HeldEnd(c.ctx, frontier)
			if err != nil {
				srv.logger.Error("read log holes", "stream", st.name, "err", err)
				c.close(closeInternal, internalReason("the log could not be read; retry later"))
				// The socket is this function's (writing, counted in
				// c.wg): its writer sends the close and lets go.
				go func() {
					defer c.wg.Done()
					c.writeLoop()
				}()
				return nil
			}
			rg.End = max(end, start)
		}
	}
	greet := st.greeting(frontier, rg, where)
	if !hasWindow || start >= frontier {
		release()
	}
	go func() {
		defer c.wg.Done()
		if hasWindow && start < frontier {
			sub.replay(greet, start, frontier)
			release()
		} else if err := c.writeDirect(greet); err != nil {
			c.abort()
		}
		c.writeLoop()
	}()
	return sub
}

// closeInternal is the close code for a server-side failure (RFC 6455 1011);
// pkg/wire has no name for it, so it is defined here.
const closeInternal = 1011

// internalReason is the reason of a 1011 close: {"error":"internal","detail":…}.
func internalReason(detail string) string {
	return wire.CloseReason("internal", wire.Field{Key: "detail", Value: detail})
}

// replayChunk is how many bytes of replayed frames are written per syscall.
const replayChunk = 128 << 10

var replayBufs = sync.Pool{New: func() any { b := make([]byte, 0, replayChunk+4096); return &b }}

// replayDeflaters holds the compressors of replays to compressing
// subscribers: one is held only while a replay runs.
var replayDeflaters = sync.Pool{New: func() any { return wire.NewDeflater() }}

// replay writes the greeting and the frames of [start, frontier) read from
// the log, filtered by the subscriber's where=. It runs on the goroutine that
// owns the socket; on failure the connection is closed with a reason.
func (sub *subscriber) replay(greet []byte, start, frontier int64) {
	c, st := sub.c, sub.st
	bp := replayBufs.Get().(*[]byte)
	buf := append((*bp)[:0], greet...)
	defer func() {
		*bp = buf[:0]
		if cap(buf) <= 4*replayChunk {
			replayBufs.Put(bp)
		}
	}()
	// A compressing subscriber's replay has a compressor of its own, let go
	// when the replay ends: the live frames after it either refer to
	// nothing before them or are plain.
	// One past the server's compressor budget is written plain, which the
	// extension allows.
	var z *wire.Deflater
	if c.deflate == deflateContext {
		if b := c.srv.deflaters; b.acquire() {
			z = replayDeflaters.Get().(*wire.Deflater)
			z.Reset()
			defer func() {
				replayDeflaters.Put(z)
				b.release()
			}()
		} else {
			b.deferred.Add(1)
		}
	}
	var werr error
	sent := false
	// Counted in plain variables and published once per chunk: no atomic
	// per row.
	var tiers logstore.TierRows
	pending := int64(0) // frames in buf
	var zbuf []byte     // one plain frame, while z compresses it
	if m := st.m; m != nil {
		defer func() { m.Replayed(&tiers) }()
	}
	delivered := func() {
		if pending > 0 {
			c.rows.Add(pending)
			if st.m != nil {
				st.m.FramesDelivered.Add(pending)
			}
		}
		pending = 0
	}
	err := st.log.ScanCounting(c.ctx, start, frontier, sub.filter, &tiers, func(offset, ts int64, row []byte) error {
		if z != nil {
			start := len(buf)
			buf = wire.AppendDataFrame(buf, offset, ts, row)
			frame := append(zbuf[:0], buf[start:]...)
			zbuf = frame
			buf = z.AppendFrame(buf[:start], frame)
		} else {
			buf = wire.AppendDataFrame(buf, offset, ts, row)
		}
		sent = true
		pending++
		if len(buf) >= replayChunk {
			if ctrl := c.takeCtrl(); ctrl != nil {
				for _, f := range ctrl {
					if werr = c.writeDirect(f); werr != nil {
						return werr
					}
				}
			}
			if werr = c.writeDirect(buf); werr != nil {
				return werr
			}
			delivered()
			buf = buf[:0]
		}
		return nil
	})
	if werr != nil || c.ctx.Err() != nil {
		c.abort()
		return
	}
	if err != nil {
		var re *logstore.RangeError
		if errors.As(err, &re) && !sent {
			// Evicted between the extent check and the scan: the
			// greeting is not written yet, so refuse as if before it.
			nr := &wire.NotReplayable{Why: wire.WhyEvicted, Offset: start, Earliest: re.Earliest, EndOffset: frontier, MaxReplay: wire.Null}
			c.close(nr.Code(), nr.Reason())
			return
		}
		sub.st.srv.logger.Error("replay failed", "stream", st.name, "from", start, "to", frontier, "err", err)
		if werr = c.writeDirect(buf); werr != nil {
			c.abort()
			return
		}
		delivered()
		c.close(closeInternal, internalReason("replay failed; resume from the last offset received"))
		return
	}
	if werr = c.writeDirect(buf); werr != nil {
		c.abort()
		return
	}
	delivered()
}

// discard reads and drops a message a subscriber sent.
func discard(r io.Reader) (int64, error) {
	return io.Copy(io.Discard, r)
}

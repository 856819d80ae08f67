package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/wire"
)

// writevFrames is how many frames one write takes at most: the kernel's
// iovec limit, so chunking costs no syscalls.
const writevFrames = 1024

// closeGrace bounds how long a connection waits for its queued frames and its
// close frame to be written, and for the peer to answer a close.
const closeGrace = 5 * time.Second

// maxAbsorbedControl is how many control frames a peer may send while an
// answer of the server's is still unwritten (its writer is blocked on the
// peer) before the connection counts as a control flood and is closed with
// 1008. Each such ping only replaces the one pending pong (RFC 6455 §5.5.3
// allows answering the most recent ping only), so memory stays bounded
// either way; the limit stops the CPU a flood would cost.
const maxAbsorbedControl = 1024

// DefaultDropGrace is Options.DropGrace's default: how long a subscriber
// dropped for falling behind (4429) has to take its contiguous prefix and
// the close frame.
const DefaultDropGrace = 10 * time.Second

// wsConn is one upgraded connection. gorilla/websocket did the handshake and
// reads frames; every write goes through this type's queue and is made by at
// most one goroutine at a time (the writer, or the replay that precedes it),
// straight to the net.Conn with batched writes: data frames arrive already
// encoded (header and payload) and are shared, never copied, between
// connections (I4).
type wsConn struct {
	srv *Server
	ws  *websocket.Conn
	nc  net.Conn
	// raw is the TCP connection under nc: nc itself, or the one a TLS
	// connection runs over. abort closes raw, so that it returns at once
	// (a TLS Close would first try to send its close alert to a peer that
	// may not be reading).
	raw net.Conn
	// sealed is set over TLS, where each Write is sealed as records of its
	// own: writeBatch copies frames into one buffer there instead of
	// handing them to writev.
	sealed bool
	// direct is raw's socket for writes that do not wait (writeClaimed):
	// nil over TLS and where the platform has no writev.
	direct syscall.RawConn
	st     *stream // nil while refusing a request for an unknown stream
	// events is set on a Server-Sent Events subscriber (sse.go): it is nc,
	// and there is no ws, as the peer sends nothing.
	events *eventWriter
	// deflate is what permessage-deflate the connection negotiated
	// (deflate.go); set before it is served.
	deflate deflateMode

	ctx    context.Context // cancelled when the connection ends (stops a replay)
	cancel context.CancelFunc

	// reads counts frames read from the peer (pongs included); keepalive
	// compares it between ticks to find dead peers without a clock per frame.
	reads     atomic.Int64
	seenReads int64 // reads at the previous keepalive tick; keepalive goroutine only
	// written counts data bytes the kernel took for this connection. A
	// subscriber that only reads sends nothing but pongs, and its pong can
	// sit behind a long backlog; data still draining to it proves it alive
	// meanwhile. Control frames do not count: a peer that never reads still
	// takes a few pings into its socket buffer.
	written     atomic.Int64
	seenWritten int64 // written at the previous keepalive tick; keepalive goroutine only
	// holding is set while the server itself stops reading the socket
	// (publisher backpressure): the peer's pongs wait unread, so silence
	// then proves nothing.
	holding atomic.Bool
	pinged  bool // a ping went out at the previous tick; keepalive goroutine only

	pub   *publisher // set on publisher connections
	began time.Time  // when the connection was upgraded, for the access log
	// rows counts, for the access log, the data frames written to a
	// subscriber, or the rows committed from a publisher.
	rows atomic.Int64
	// afterWrite, when set, is told how many queued data frames each write put
	// on the wire (publishers count their owed replies with it).
	afterWrite func(n int)
	// onDead, when set, is told that the socket failed.
	onDead func()

	wg sync.WaitGroup // the writer goroutine

	// out is the data frames queued or being written, in order (queue.go);
	// guarded by mu.
	out frameQueue

	mu        sync.Mutex
	ctrl      [][]byte // the server's pings, written before out
	pong      []byte   // the answer to the peer's latest ping, unwritten; a newer ping replaces it
	absorbed  int      // control frames read while a control frame of ours was unwritten
	flooded   bool     // the peer flooded control frames; it is being closed
	closing   []byte   // close frame to write once out is written; nil = none yet
	closeCode int      // code of closing
	// closedByPeer: closing answers the peer's close frame, rather than
	// one the server began (for the access log).
	closedByPeer bool
	closeSent    bool // closing was handed to the writer
	peerClosed   bool // the peer's close frame was read
	writing      bool // the writer (or a replay, or a claimed write) owns the socket
	// headWritten is how many bytes of out's first frame a claimed write
	// put on the wire; the writer sends the rest of that frame first.
	headWritten int
	finishing   bool // the connection is ending: no new writer may start
	dead        bool // the socket failed: frames are dropped
}

func newConn(srv *Server, ws *websocket.Conn, nc net.Conn, frames *peerFollower, st *stream) *wsConn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &wsConn{srv: srv, ws: ws, nc: nc, raw: nc, st: st, ctx: ctx, cancel: cancel, began: time.Now()}
	if tc, ok := nc.(*tls.Conn); ok {
		c.raw, c.sealed = tc.NetConn(), true
	} else {
		c.direct = rawConnOf(nc)
	}
	// All writes go through the writer: answer pings and closes through it,
	// never through gorilla's own control writes.
	// A control frame proves the peer alive only while the server's own
	// control frames reach it: one read while our pong or ping still waits
	// for a blocked writer says nothing about whether the peer reads.
	ws.SetPingHandler(func(data string) error {
		return c.controlIn(wire.ControlFrame(wire.OpPong, []byte(data)))
	})
	ws.SetPongHandler(func(string) error {
		return c.controlIn(nil)
	})
	ws.SetCloseHandler(func(code int, _ string) error {
		c.mu.Lock()
		c.peerClosed = true
		c.mu.Unlock()
		if code == websocket.CloseNoStatusReceived {
			// gorilla reports a 1-byte close payload as no payload; the
			// frames it read tell the two apart. A close body starts
			// with a 2-byte code (RFC 6455 §5.5.1), so one byte is a
			// protocol error, answered 1002.
			if frames != nil && frames.BadClose() {
				c.close(websocket.CloseProtocolError, wire.CloseReason("protocol_error",
					wire.Field{Key: "detail", Value: "a close frame's payload was 1 byte; it is empty, or a 2-byte code and a reason"}))
				return nil
			}
			code = websocket.CloseNormalClosure
		}
		c.close(code, "")
		return nil
	})
	return c
}

// startWriterLocked starts the writer goroutine; c.mu is held and the caller
// has checked that no writer runs and the connection is not finishing.
func (c *wsConn) startWriterLocked() {
	c.writing = true
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.writeLoop()
	}()
}

// canStartLocked reports whether a new writer may start now.
func (c *wsConn) canStartLocked() bool {
	return !c.writing && !c.finishing && !c.dead
}

// enqueue queues complete frames for writing, in order. Frames queued after
// the close frame are dropped.
func (c *wsConn) enqueue(frames ...[]byte) {
	c.mu.Lock()
	if c.pushLocked(frames) && c.canStartLocked() {
		c.startWriterLocked()
	}
	c.mu.Unlock()
}

// pushLocked queues frames unless the connection is dead or closing, and
// reports whether it did; c.mu is held.
func (c *wsConn) pushLocked(frames [][]byte) bool {
	if c.dead || c.closing != nil {
		return false
	}
	for _, f := range frames {
		c.out.Push(f, 0)
	}
	return true
}

// enqueueClaiming queues frames like enqueue and, when no writer runs and
// nothing else waits to be written, claims the socket for the caller
// instead of starting a writer goroutine: it reports true, and the caller
// must then call writeClaimed, outside any lock writeClaimed's afterWrite
// takes. Whoever answers a stream's publishers (the committer or the
// deliverer) queues their replies this way, because waking another
// goroutine for a few hundred bytes of replies costs more than the write
// (a CPU profile of small-frame publishing showed it).
func (c *wsConn) enqueueClaiming(frames ...[]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pushLocked(frames) || !c.canStartLocked() {
		return false
	}
	if c.direct == nil || len(c.ctrl) > 0 || c.pong != nil {
		c.startWriterLocked()
		return false
	}
	c.writing = true
	c.wg.Add(1) // finish waits for a claimed write as for a writer
	return true
}

// writeClaimed writes what is queued with one writev that does not wait
// for the socket, then hands whatever the kernel did not take (and
// anything queued meanwhile) to a writer goroutine. The caller claimed the
// socket with enqueueClaiming. A peer that does not read its replies thus
// never holds up the caller.
func (c *wsConn) writeClaimed() {
	defer c.wg.Done()
	iov := iovPool.Get().(*[writevFrames][]byte)
	defer func() {
		clear(iov[:])
		iovPool.Put(iov)
	}()
	c.mu.Lock()
	k := c.out.Peek(iov[:])
	skip := c.headWritten
	c.mu.Unlock()
	batch := iov[:k]
	if k > 0 && skip > 0 {
		batch[0] = batch[0][skip:]
	}
	if h := c.srv.opts.writeHook; h != nil && k > 0 {
		h(c, k, true)
	}
	n := 0
	if k > 0 {
		n = writevNow(c.direct, batch)
	}
	// Whole frames written leave the queue; a frame written in part stays
	// at its head, with the bytes already sent noted for the writer.
	done, left := 0, n
	for done < k && left >= len(batch[done]) {
		left -= len(batch[done])
		done++
	}
	c.written.Add(int64(n))
	if c.st != nil {
		c.st.bytesSent.Add(int64(n))
	}
	c.popWritten(done, left)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dead && (c.out.Len() > 0 || len(c.ctrl) > 0 || c.pong != nil || (c.closing != nil && !c.closeSent)) {
		// Still owned: the writer takes over the claim (finishing or
		// not, as a running writer would carry on).
		c.startWriterLocked()
		return
	}
	c.writing = false
}

// popWritten takes k frames the kernel took whole off the queue, notes
// that partial bytes of the next one are on the wire too, and tells
// afterWrite; only the socket's owner calls it.
func (c *wsConn) popWritten(k, partial int) {
	var released int64
	c.mu.Lock()
	if !c.dead {
		released = c.out.Pop(k)
		if k > 0 {
			c.headWritten = 0
		}
		c.headWritten += partial
	}
	c.mu.Unlock()
	c.srv.reclaim.Note(released)
	if k > 0 && c.afterWrite != nil {
		c.afterWrite(k)
	}
}

// errControlFlood ends the read loop of a peer that floods control frames.
var errControlFlood = errors.New("the peer flooded control frames")

// controlIn accounts for a control frame read from the peer: pong, when
// not nil, is the answer to a ping, and replaces any answer still pending.
// It returns errControlFlood, which ends the read loop, once the peer has
// sent maxAbsorbedControl frames without reading ours; the connection is
// then closed with 1008 and logged once.
func (c *wsConn) controlIn(pong []byte) error {
	c.mu.Lock()
	if c.dead || c.closeSent || c.flooded {
		c.mu.Unlock()
		return nil
	}
	pending := c.pong != nil || len(c.ctrl) > 0
	if pending {
		c.absorbed++
	}
	if pong != nil {
		c.pong = pong
		if c.canStartLocked() {
			c.startWriterLocked()
		}
	}
	flood := c.absorbed > maxAbsorbedControl
	if flood {
		c.flooded = true
		c.pong = nil
		c.closeLocked(websocket.ClosePolicyViolation, wire.CloseReason("control_flood", wire.Field{Key: "max_unanswered", Value: maxAbsorbedControl}))
	}
	c.mu.Unlock()
	if !pending {
		c.reads.Add(1)
	}
	if flood {
		stream := ""
		if c.st != nil {
			stream = c.st.name
		}
		c.srv.logger.Warn("closing a connection that sends control frames without reading the answers (1008)",
			"remote", c.nc.RemoteAddr().String(), "stream", stream, "unanswered", maxAbsorbedControl)
		return errControlFlood
	}
	return nil
}

// enqueueCtrl queues a control frame, written ahead of queued data frames.
func (c *wsConn) enqueueCtrl(frame []byte) {
	c.mu.Lock()
	if c.dead || c.closeSent {
		c.mu.Unlock()
		return
	}
	c.ctrl = append(c.ctrl, frame)
	if c.canStartLocked() {
		c.startWriterLocked()
	}
	c.mu.Unlock()
}

// close queues a close frame after everything already queued; the first call
// wins. It reports whether this call set the close frame.
func (c *wsConn) close(code int, reason string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeLocked(code, reason)
}

func (c *wsConn) closeLocked(code int, reason string) bool {
	if c.closing != nil || c.dead {
		return false
	}
	c.closing = wire.CloseFrame(code, reason)
	c.closeCode, c.closedByPeer = code, c.peerClosed
	if !c.peerClosed {
		// The server's own close (an echo of the peer's says nothing).
		c.srv.countClose(c.st, code)
	}
	if c.canStartLocked() {
		c.startWriterLocked()
	}
	return true
}

// abort drops the connection at once: nothing more is written.
func (c *wsConn) abort() {
	c.mu.Lock()
	c.dead = true
	c.ctrl, c.pong = nil, nil
	released := c.dropQueueLocked()
	c.mu.Unlock()
	c.srv.reclaim.Note(released)
	_ = c.raw.Close()
	if c.onDead != nil {
		c.onDead()
	}
}

// isDead reports whether the socket failed or was aborted.
func (c *wsConn) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// writeLoop writes whatever is queued, as few syscalls as the kernel allows
// (net.Buffers → writev), until the queue is empty. It takes at most
// writevFrames frames per write and removes them from the queue only once
// written, so frames in the kernel's hands are the only ones max_backlog
// does not count; control frames queued meanwhile go out between writes.
func (c *wsConn) writeLoop() {
	var ctrl [][]byte
	var iov *[writevFrames][]byte
	defer func() {
		if iov != nil {
			clear(iov[:])
			iovPool.Put(iov)
		}
	}()
	for {
		c.mu.Lock()
		if c.dead {
			c.writing = false
			c.mu.Unlock()
			return
		}
		ctrl = ctrl[:0]
		if c.headWritten == 0 {
			// A control frame goes out between data frames only: while
			// a claimed write has left the first frame half sent, it
			// waits for the next write.
			ctrl = append(ctrl, c.ctrl...)
			clear(c.ctrl)
			c.ctrl = c.ctrl[:0]
			if c.pong != nil {
				ctrl = append(ctrl, c.pong)
				c.pong, c.absorbed = nil, 0
			}
		}
		k, skip := 0, 0
		if c.out.Len() > 0 {
			if iov == nil {
				iov = iovPool.Get().(*[writevFrames][]byte)
			}
			k = c.out.Peek(iov[:])
			skip = c.headWritten
		}
		var closing []byte
		if c.closing != nil && !c.closeSent && k == c.out.Len() {
			closing = c.closing
			c.closeSent = true
		}
		if len(ctrl) == 0 && k == 0 && closing == nil {
			c.writing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()

		var batch [][]byte
		if k > 0 {
			batch = iov[:k:k] // full slice: writeFrames appends the close frame to a copy
			if skip > 0 {
				batch[0] = batch[0][skip:] // the rest of a frame a claimed write began
			}
			if h := c.srv.opts.writeHook; h != nil {
				h(c, k, false)
			}
		}
		if err := c.writeFrames(ctrl, batch, closing); err != nil {
			c.mu.Lock()
			c.dead = true
			c.writing = false
			c.ctrl, c.pong = nil, nil
			released := c.dropQueueLocked()
			c.mu.Unlock()
			c.srv.reclaim.Note(released)
			_ = c.nc.Close()
			if c.onDead != nil {
				c.onDead()
			}
			return
		}
		clear(ctrl)
		if k > 0 && c.pub == nil {
			c.rows.Add(int64(k)) // a subscriber's data frames
			if c.st != nil && c.st.m != nil {
				c.st.m.FramesDelivered.Add(int64(k))
			}
		}
		if k > 0 {
			clear(iov[:k])
			c.popWritten(k, 0)
		}
		if closing != nil {
			// The close frame is out; wait a bounded time for the peer's.
			_ = c.nc.SetReadDeadline(time.Now().Add(closeGrace))
		}
	}
}

// iovPool holds the writers' iovecs: a writer holds one only while it has
// frames to write, so an idle connection holds none.
var iovPool = sync.Pool{New: func() any { return new([writevFrames][]byte) }}

// dropQueueLocked empties the data queue of a connection that is ending and
// returns the bytes it pinned, for the server's reclaimer; c.mu is held.
func (c *wsConn) dropQueueLocked() int64 {
	released := c.out.Bytes()
	c.out.Reset()
	c.headWritten = 0
	return released
}

// writeFrames writes control frames, then data frames, then a close frame,
// with one writev where possible.
func (c *wsConn) writeFrames(ctrl, batch [][]byte, closing []byte) error {
	var total int64
	if len(ctrl) > 0 {
		n, err := c.writeBatch(ctrl)
		total += n
		if err != nil {
			return err
		}
	}
	if len(batch) > 0 {
		if closing != nil {
			batch = append(batch, closing)
			closing = nil
		}
		// In chunks the size of one writev, so keepalive sees a slow but
		// live peer make progress during a long backlog.
		for len(batch) > 0 {
			k := min(len(batch), writevFrames)
			n, err := c.writeBatch(batch[:k])
			total += n
			c.written.Add(n)
			if err != nil {
				return err
			}
			batch = batch[k:]
		}
	}
	if closing != nil {
		n, err := c.nc.Write(closing)
		total += int64(n)
		if err != nil {
			return err
		}
	}
	if c.st != nil {
		c.st.bytesSent.Add(total)
	}
	return nil
}

// writeBatch writes frames in as few syscalls as the connection allows.
// A plain TCP connection takes them all in one writev. A TLS connection
// has no writev: net.Buffers would make each frame a record of its own,
// sealed and written with a syscall of its own, so the frames are copied
// into one buffer of up to wire.CoalesceChunk bytes first, which TLS seals as a few
// records of 16 KiB. The copy costs less than the records and syscalls it
// saves (BenchmarkWriteBatchTLS).
func (c *wsConn) writeBatch(frames [][]byte) (int64, error) {
	if !c.sealed {
		bufs := net.Buffers(frames)
		if cc, ok := c.nc.(*countedConn); ok {
			// net.Buffers takes the writev path only on the socket
			// itself: through the listener's wrapper it would write each
			// frame with a syscall of its own (100 subscribers at 20k
			// rows/s: p99 2.9 s instead of 7 ms, BenchmarkDeliveryWith100Subscribers).
			return bufs.WriteTo(cc.Conn)
		}
		return bufs.WriteTo(c.nc)
	}
	return wire.WriteCoalesced(c.nc, frames)
}

// writeDirect writes b from the goroutine that owns the socket (the replay).
func (c *wsConn) writeDirect(b []byte) error {
	n, err := c.nc.Write(b)
	c.written.Add(int64(n))
	if c.st != nil {
		c.st.bytesSent.Add(int64(n))
	}
	return err
}

// takeCtrl hands the queued control frames to the goroutine that owns the
// socket (the replay answers pings between chunks).
func (c *wsConn) takeCtrl() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ctrl) == 0 && c.pong == nil {
		return nil
	}
	out := c.ctrl
	c.ctrl = nil
	if c.pong != nil {
		out = append(out, c.pong)
		c.pong, c.absorbed = nil, 0
	}
	return out
}

// readLoop reads until the peer closes or fails, discarding data frames (a
// subscriber has nothing to say); gorilla calls the control handlers above.
// A compressed message is skipped unread, never inflated: the next
// NextReader discards its bytes as they came, so a subscriber cannot make
// the server inflate anything.
func (c *wsConn) readLoop() {
	if c.events != nil {
		c.events.wait()
		return
	}
	for {
		_, r, err := c.ws.NextReader()
		if err != nil {
			return
		}
		c.reads.Add(1)
		if c.deflate != deflateOff {
			continue
		}
		if _, err := discard(r); err != nil {
			return
		}
	}
}

// finish ends the connection: the writer gets a bounded time to write what is
// queued (the close frame among it), then the socket is closed and every
// goroutine of the connection has ended when finish returns.
func (c *wsConn) finish() {
	c.mu.Lock()
	c.finishing = true
	writing := c.writing
	orderly := c.peerClosed || c.closing != nil
	c.mu.Unlock()
	if writing && orderly {
		_ = c.nc.SetWriteDeadline(time.Now().Add(closeGrace))
	} else if writing {
		// The peer is gone without a close: nothing queued can reach it.
		c.abort()
	}
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	failed := c.dead
	c.dead = true
	c.ctrl, c.pong = nil, nil
	released := c.dropQueueLocked()
	c.mu.Unlock()
	c.srv.reclaim.Note(released)
	if failed {
		// A failed or aborted socket: over TLS, Close would first wait
		// (up to 5 s) to send its close alert to a peer that is not reading.
		_ = c.raw.Close()
	}
	_ = c.nc.Close()
}

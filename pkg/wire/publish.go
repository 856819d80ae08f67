package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// PublishOptions configure a publisher connection.
type PublishOptions struct {
	DialOptions

	// Publisher is an exactly-once publisher id (1–128 bytes, stable across
	// restarts). Frames are then numbered from the greeting's mark + 1; ""
	// publishes plainly.
	Publisher string
	// MaxInFlight is how many frames may await their reply; 0 means
	// DefaultMaxInFlight. Above the server's max_in_flight it only makes the
	// server stop reading the socket until replies are sent.
	MaxInFlight int
	// Coalesce, when positive, lets frames share socket writes: Submit
	// holds a frame, and the frames held go out together when Flush is
	// called, when Submit has to wait for window room, when 64 KiB are
	// held, and at the latest Coalesce after the first of them was held.
	// A caller that submits in bursts (a pipeline with a full window, a
	// file read ahead) then makes one write per burst, and the server one
	// read, where each frame had cost both a system call. Send,
	// SendBatch, Ack.Wait and Close flush; a caller that waits on
	// Ack.Done alone should Flush first, or its frame waits up to
	// Coalesce. 0 writes each frame as it is submitted.
	Coalesce time.Duration
}

// Publisher is one publisher connection. Its methods are safe for
// concurrent use; replies are matched to frames in send order.
type Publisher struct {
	conn     *websocket.Conn
	req      Request
	greeting *Greeting
	window   chan struct{} // one token per frame awaiting its reply
	held     *heldConn     // the socket, when frames are coalesced (PublishOptions.Coalesce); else nil

	writeMu sync.Mutex // a frame is queued and written under it, so queue order = wire order
	wbuf    []byte     // frame being built, under writeMu
	seq     int64      // exactly-once: seq of the next row, under writeMu

	mu      sync.Mutex // guards pending and err
	pending []*Ack     // frames sent and not yet answered, oldest first
	head    int
	err     error         // terminal: every later Submit returns it
	idle    chan struct{} // closed and replaced when pending empties (for Close)

	closing atomic.Bool
	dead    chan struct{} // closed when the reader goroutine has exited
	once    sync.Once
}

// Ack is the future result of one publish frame.
type Ack struct {
	rows    int        // rows in the frame (0 when unknown)
	pub     *Publisher // set when the publisher coalesces: Wait flushes it
	done    chan struct{}
	offsets []int64
	dup     bool
	err     error
}

// Done is closed when the reply (or the connection's end) settled the ack.
// Unlike Wait it never flushes a coalescing publisher (PublishOptions.Coalesce),
// so a pipeline can watch its acks while the sender builds the next burst.
func (a *Ack) Done() <-chan struct{} { return a.done }

// Wait waits for the frame's reply and returns the offsets of its rows, in
// order (Null entries on a live-only stream), or the reply's error
// (*Rejected, *CommitFailed, *SequenceGap, *BadFrame) or the connection's.
// If ctx ends first, the reply is still owed and Close still waits for it.
func (a *Ack) Wait(ctx context.Context) ([]int64, error) {
	select {
	case <-a.done:
		return a.offsets, a.err
	default:
	}
	if a.pub != nil {
		a.pub.Flush() // its frame may be held
	}
	select {
	case <-a.done:
		return a.offsets, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Duplicate reports (once Done) that an exactly-once frame was at or below
// the publisher's mark and was not appended again.
func (a *Ack) Duplicate() bool {
	<-a.done
	return a.dup
}

func (a *Ack) settle(offsets []int64, dup bool, err error) {
	a.offsets, a.dup, a.err = offsets, dup, err
	close(a.done)
}

// Publish connects to a stream as a publisher and waits for the greeting, so
// a refusal (*StreamRetired, *StreamNotFound, *ExactlyOnceUnavailable, …) is
// returned here.
func Publish(ctx context.Context, rawURL string, opts PublishOptions) (*Publisher, error) {
	var lastHeld func() *heldConn
	if opts.Coalesce > 0 {
		u, _ := url.Parse(rawURL) // connect refuses a URL that does not parse
		opts.Dialer, lastHeld = holdingDialer(opts.dialer(u), opts.Coalesce)
	}
	conn, req, g, err := connect(ctx, rawURL, &opts.DialOptions, func(r *Request) error {
		if r.Offset != Null || r.Where != nil {
			return errors.New("a publisher takes no offset or where; remove them from the URL")
		}
		r.Publish = true
		if opts.Publisher != "" {
			if r.Publisher != "" && r.Publisher != opts.Publisher {
				return errors.New("publisher is given twice (in the URL and in the options); pass one")
			}
			if len(opts.Publisher) > MaxPublisherBytes {
				return fmt.Errorf("publisher id is %d bytes; give 1 to %d", len(opts.Publisher), MaxPublisherBytes)
			}
			r.Publisher = opts.Publisher
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	n := opts.MaxInFlight
	if n <= 0 {
		n = DefaultMaxInFlight
	}
	p := &Publisher{
		conn:     conn,
		req:      req,
		greeting: g,
		window:   make(chan struct{}, n),
		idle:     make(chan struct{}),
		dead:     make(chan struct{}),
		seq:      1,
	}
	if lastHeld != nil {
		// nil when the caller's Dialer makes its own TLS connections
		// (NetDialTLSContext): frames are then written one at a time.
		p.held = lastHeld()
	}
	if req.Publisher != "" {
		if g.Publisher == nil {
			conn.Close()
			return nil, &ProtocolError{Msg: "the greeting of an exactly-once publisher carries no publisher mark"}
		}
		p.seq = g.Publisher.LastSeq + 1
	}
	go p.read()
	return p, nil
}

// Greeting returns the server's greeting (its schema, and for an
// exactly-once publisher its mark).
func (p *Publisher) Greeting() *Greeting { return p.greeting }

// Send publishes one row (a JSON object) and waits for its offset.
func (p *Publisher) Send(ctx context.Context, row []byte) (int64, error) {
	a, err := p.Submit(ctx, row)
	if err != nil {
		return Null, err
	}
	offs, err := a.Wait(ctx)
	if err != nil {
		return Null, err
	}
	if len(offs) != 1 {
		return Null, &ProtocolError{Msg: fmt.Sprintf("a one-row send was answered with %d offsets", len(offs))}
	}
	return offs[0], nil
}

// SendBatch publishes rows as one all-or-nothing batch and waits for their
// offsets. An empty batch sends nothing.
func (p *Publisher) SendBatch(ctx context.Context, rows [][]byte) ([]int64, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	a, err := p.SubmitBatch(ctx, rows)
	if err != nil {
		return nil, err
	}
	return a.Wait(ctx)
}

// Submit sends frame, a JSON object (one row) or a non-empty JSON array of
// objects (one batch), without waiting for the reply. It waits only for
// window room (MaxInFlight frames unanswered) and the write.
func (p *Publisher) Submit(ctx context.Context, frame []byte) (*Ack, error) {
	rows, err := frameRows(frame, p.req.Publisher != "")
	if err != nil {
		return nil, err
	}
	return p.submit(ctx, rows, func(dst []byte) []byte { return append(dst, frame...) })
}

// frameRows checks that frame is a row (a JSON object) or a batch (an
// array), and returns how many rows it holds when counted is set: an
// exactly-once publisher's seq needs the count, which costs a scan of the
// whole batch, so a plain publisher's batch is not counted (0).
func frameRows(frame []byte, counted bool) (int, error) {
	switch firstByte(frame) {
	case '{':
		return 1, nil
	case '[':
		if !counted {
			return 0, nil
		}
		rows, ok := countElements(frame)
		if !ok || rows == 0 {
			return 0, fmt.Errorf("publish frame is not a non-empty JSON array of rows: %s", clip(frame, 40))
		}
		return rows, nil
	}
	return 0, fmt.Errorf("publish frame is not a row (JSON object) or a batch (array of objects): %s", clip(frame, 40))
}

// SubmitBatch is Submit of the batch [rows…].
func (p *Publisher) SubmitBatch(ctx context.Context, rows [][]byte) (*Ack, error) {
	if len(rows) == 0 {
		return nil, errors.New("an empty batch has nothing to publish")
	}
	return p.submit(ctx, len(rows), func(dst []byte) []byte {
		dst = append(dst, '[')
		for i, r := range rows {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, r...)
		}
		return append(dst, ']')
	})
}

func (p *Publisher) submit(ctx context.Context, rows int, build func([]byte) []byte) (*Ack, error) {
	if p.closing.Load() {
		return nil, ErrClosed
	}
	select {
	case p.window <- struct{}{}:
	default:
		p.Flush() // the server answers only frames it has
		select {
		case p.window <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.dead:
			return nil, p.terminal()
		}
	}
	a := &Ack{rows: rows, done: make(chan struct{})}
	if p.held != nil {
		a.pub = p
	}
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if p.closing.Load() {
		<-p.window
		return nil, ErrClosed
	}
	b := p.wbuf[:0]
	if p.req.Publisher != "" {
		b = append(b, '[')
		b = strconv.AppendInt(b, p.seq, 10)
		b = append(b, ',')
		b = build(b)
		b = append(b, ']')
	} else {
		b = build(b)
	}
	p.wbuf = b
	// Queue before writing: the reply may arrive before WriteMessage returns.
	p.mu.Lock()
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		<-p.window
		return nil, err
	}
	p.pending = append(p.pending, a)
	p.mu.Unlock()
	if err := p.writeFrame(b); err != nil {
		if errors.Is(err, websocket.ErrCloseSent) && !p.closing.Load() {
			// The server closed the connection: gorilla answered its close
			// frame from the reader, which is about to record the server's
			// reason (4409 superseded, 1001 …). That reason, not "close
			// sent", is what this ack and every later call must report.
			<-p.dead
			return a, nil
		}
		// The reader fails every pending ack, this one included, once the
		// socket is closed under it.
		p.fail(fmt.Errorf("publish to %q: %w", p.req.Stream, err))
		p.conn.Close()
		return a, nil
	}
	if p.req.Publisher != "" {
		p.seq += int64(rows)
	}
	if cap(p.wbuf) > 1<<20 {
		p.wbuf = nil // do not pin one huge batch's buffer
	}
	return a, nil
}

// compressFrom is the smallest publish frame sent compressed, where the
// server negotiated permessage-deflate: each message is compressed on its
// own, and a row or a few shrink too little to pay for it.
const compressFrom = 1 << 10

// writeFrame writes one frame, held when the publisher coalesces.
func (p *Publisher) writeFrame(b []byte) error {
	p.conn.EnableWriteCompression(len(b) >= compressFrom) // a no-op unless negotiated
	if p.held == nil {
		return p.conn.WriteMessage(websocket.TextMessage, b)
	}
	p.held.setHold(true)
	defer p.held.setHold(false)
	return p.conn.WriteMessage(websocket.TextMessage, b)
}

// Flush writes the frames held for coalescing (PublishOptions.Coalesce);
// without coalescing there are none. A failed write ends the connection,
// as a failed Submit does: every pending ack then fails with the error.
func (p *Publisher) Flush() {
	if p.held == nil {
		return
	}
	if err := p.held.Flush(); err != nil {
		p.fail(fmt.Errorf("publish to %q: %w", p.req.Stream, err))
		p.conn.Close()
	}
}

// read matches replies to pending acks until the connection ends.
func (p *Publisher) read() {
	defer close(p.dead)
	var buf []byte
	var reply Reply
	for {
		typ, r, err := p.conn.NextReader()
		if err == nil {
			buf, err = readAll(r, buf[:0])
		}
		if err != nil {
			if p.closing.Load() && isNetClosed(err) {
				err = ErrClosed
			} else if err = closeErr(err, p.req, Null); err == io.EOF {
				err = &CloseError{Code: CloseNormal, Reason: "the server ended the connection before answering"}
			}
			p.fail(err)
			return
		}
		if typ != websocket.TextMessage {
			p.fail(&ProtocolError{Msg: "a publish reply was binary; replies are text"})
			p.conn.Close()
			return
		}
		if err := ParseReply(buf, &reply); err != nil {
			p.fail(err)
			p.conn.Close()
			return
		}
		p.mu.Lock()
		if p.head == len(p.pending) {
			p.mu.Unlock()
			p.fail(&ProtocolError{Msg: "the server sent a publish reply with no frame awaiting one: " + clip(buf, 40)})
			p.conn.Close()
			return
		}
		a := p.pending[p.head]
		p.pending[p.head] = nil
		p.head++
		if p.head == len(p.pending) {
			p.pending, p.head = p.pending[:0], 0
			close(p.idle)
			p.idle = make(chan struct{})
		}
		p.mu.Unlock()
		<-p.window
		if err := reply.Err(); err != nil {
			a.settle(nil, false, err)
			continue
		}
		if a.rows > 0 && len(reply.OK) != a.rows {
			a.settle(nil, false, &ProtocolError{Msg: fmt.Sprintf("a frame of %d rows was answered with %d offsets", a.rows, len(reply.OK))})
			continue
		}
		a.settle(append([]int64(nil), reply.OK...), reply.Duplicate, nil)
	}
}

// fail records the connection's terminal error (the first wins) and settles
// every pending ack with it.
func (p *Publisher) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	err = p.err
	pend := p.pending[p.head:]
	p.pending, p.head = nil, 0
	close(p.idle)
	p.idle = make(chan struct{})
	p.mu.Unlock()
	for _, a := range pend {
		<-p.window
		a.settle(nil, false, err)
	}
}

func (p *Publisher) terminal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		return ErrClosed
	}
	return p.err
}

// Close waits for every reply still owed, then closes the connection with
// 1000. It returns the error that ended the connection earlier, if any.
func (p *Publisher) Close() error { return p.CloseContext(context.Background()) }

// CloseContext is Close, giving up waiting for owed replies when ctx ends
// (those acks then fail with ErrClosed).
func (p *Publisher) CloseContext(ctx context.Context) error {
	var err error
	p.once.Do(func() {
		p.closing.Store(true)
		// Wait for in-progress submits to finish writing, then for replies.
		p.writeMu.Lock()
		p.writeMu.Unlock()
		p.Flush()
		for {
			p.mu.Lock()
			owed, idle, failed := len(p.pending)-p.head, p.idle, p.err
			p.mu.Unlock()
			if owed == 0 || failed != nil {
				break
			}
			select {
			case <-idle:
			case <-ctx.Done():
				p.fail(ErrClosed)
			}
		}
		p.mu.Lock()
		err = p.err
		p.mu.Unlock()
		_ = p.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(CloseNormal, ""), time.Now().Add(closeWait))
		select {
		case <-p.dead:
		case <-time.After(closeWait):
		}
		p.conn.Close()
		<-p.dead
		p.fail(ErrClosed)
	})
	if err == io.EOF || err == ErrClosed {
		err = nil
	}
	return err
}

// countElements counts the top-level elements of a JSON array without
// decoding it; ok is false when data is not an array.
func countElements(data []byte) (n int, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return 0, false
	}
	depth, inStr, esc, empty := 0, false, false, true
	for ; i < len(data); i++ {
		c := data[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
			if depth == 1 {
				empty = false
			}
		case '[', '{':
			if depth == 1 {
				empty = false
			}
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				if !empty {
					n++
				}
				return n, true
			}
		case ',':
			if depth == 1 {
				n++
			}
		case ' ', '\t', '\r', '\n':
		default:
			if depth == 1 {
				empty = false
			}
		}
	}
	return 0, false
}

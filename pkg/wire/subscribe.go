package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// SubscribeOptions say where a subscription starts and what it reads.
type SubscribeOptions struct {
	DialOptions

	// Offset resumes inclusive at *Offset (0 is the earliest row); nil reads
	// live from the frontier. An offset in the URL counts too; giving both
	// is an error.
	Offset *int64
	// FromEarliest is Offset = 0: every row the server still serves.
	FromEarliest bool
	// Where is the server-side filter, a JSON object of column to value (or
	// list of values); nil reads every row.
	Where json.RawMessage
}

// At returns a pointer to offset, for SubscribeOptions.Offset.
func At(offset int64) *int64 { return &offset }

// Subscription is one subscriber connection. Recv is for one goroutine at a
// time; Close may be called from any goroutine, also during a Recv.
type Subscription struct {
	conn     *websocket.Conn
	req      Request
	greeting *Greeting
	dec      decoder

	readMu sync.Mutex // serializes Recv and the drain in Close: one reader per conn
	next   int64      // where to resume to lose nothing: after the last frame, or the start
	last   int64      // offset of the last frame, Null before the first
	buf    []byte     // reused frame buffer; Message.Row points into it
	msg    Message
	err    error // terminal error; every later Recv returns it

	watchMu   sync.Mutex // orders deadline changes between Recv and a firing context watch
	watchCtx  context.Context
	stopWatch func() bool

	closed    atomic.Bool
	closeOnce sync.Once
}

// Subscribe connects to a stream and waits for its greeting, so a refusal
// (*NotReplayable, *StreamNotFound, *BadRequest, …) is returned here rather
// than from the first Recv.
func Subscribe(ctx context.Context, rawURL string, opts SubscribeOptions) (*Subscription, error) {
	conn, req, g, err := connect(ctx, rawURL, &opts.DialOptions, func(r *Request) error {
		if r.Publish {
			return errors.New("the URL asks to publish; subscribe to the stream's URL without ?publish")
		}
		if opts.FromEarliest {
			opts.Offset = At(0)
		}
		if opts.Offset != nil {
			if r.Offset != Null {
				return errors.New("offset is given twice (in the URL and in the options); pass one")
			}
			if *opts.Offset < 0 {
				return fmt.Errorf("offset %d is negative; 0 means the earliest row", *opts.Offset)
			}
			r.Offset = *opts.Offset
		}
		if opts.Where != nil {
			if r.Where != nil {
				return errors.New("where is given twice (in the URL and in the options); pass one")
			}
			if firstByte(opts.Where) != '{' || !json.Valid(opts.Where) {
				return fmt.Errorf("where %s is not a JSON object of column to value", clip(opts.Where, 40))
			}
			r.Where = opts.Where
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s := &Subscription{conn: conn, req: req, greeting: g, last: Null, next: Null, buf: make([]byte, 0, 4096)}
	s.dec.schema = g.Schema
	switch {
	case g.Replay != nil:
		s.next = g.Replay.Start
	case g.EndOffset != Null:
		s.next = g.EndOffset
	}
	s.msg.dec = &s.dec
	return s, nil
}

// Greeting returns the server's greeting.
func (s *Subscription) Greeting() *Greeting { return s.greeting }

// Resume returns the offset to resubscribe at to lose nothing: one past the
// last frame received, or the start when none arrived (Null on a live-only
// stream).
func (s *Subscription) Resume() int64 {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	return s.next
}

// Recv returns the next data frame. The Message and its Row are valid until
// the next Recv. When the server closes, Recv returns io.EOF for a clean 1000
// and otherwise the typed error of the close code (*TooSlow and *GoingAway
// carry the offset to resume at). A frame that is not [offset,ts,row], or an
// offset not above the previous one (or below the subscription's start), is a
// *ProtocolError. Any error ends the subscription, including ctx ending while
// Recv waits.
func (s *Subscription) Recv(ctx context.Context) (*Message, error) {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Close clears watchCtx under watchMu, maybe while this Recv reads.
	s.watchMu.Lock()
	watched := ctx == s.watchCtx
	s.watchMu.Unlock()
	if !watched {
		s.watch(ctx)
	}
	typ, r, err := s.conn.NextReader()
	if err == nil {
		s.buf, err = readAll(r, s.buf[:0])
	}
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	if typ != websocket.TextMessage {
		return nil, s.failWith(&ProtocolError{Msg: "a data frame was binary; streamcast frames are text"})
	}
	m := &s.msg
	var bad string
	m.Offset, m.TS, m.Row, bad = parseFrame(s.buf)
	m.frame = s.buf
	if bad != "" {
		return nil, s.failWith(&ProtocolError{Msg: bad + ": " + clip(s.buf, 60)})
	}
	if m.Offset != Null {
		switch {
		case s.last != Null && m.Offset <= s.last:
			return nil, s.failWith(&ProtocolError{Msg: fmt.Sprintf("offsets must increase within a subscription; received %d after %d", m.Offset, s.last)})
		case s.last == Null && s.next != Null && m.Offset < s.next:
			return nil, s.failWith(&ProtocolError{Msg: fmt.Sprintf("received offset %d, below %d where this subscription starts", m.Offset, s.next)})
		}
		s.last = m.Offset
		s.next = m.Offset + 1
	}
	return m, nil
}

// watch makes a read blocked in Recv return when ctx ends. The registration
// stays for later Recvs with the same ctx, so a loop over one context costs
// nothing per frame.
func (s *Subscription) watch(ctx context.Context) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.stopWatch != nil {
		s.stopWatch()
		s.stopWatch = nil
	}
	// A watch of the previous context may have fired after its Recv
	// returned; clear its deadline so it does not end this read.
	_ = s.conn.SetReadDeadline(time.Time{})
	s.watchCtx = ctx
	if ctx.Done() == nil {
		return
	}
	s.stopWatch = context.AfterFunc(ctx, func() {
		s.watchMu.Lock()
		defer s.watchMu.Unlock()
		if s.watchCtx == ctx {
			_ = s.conn.SetReadDeadline(time.Unix(1, 0))
		}
	})
}

func (s *Subscription) fail(ctx context.Context, err error) error {
	switch {
	case s.closed.Load():
		err = ErrClosed
	case ctx.Err() != nil:
		err = ctx.Err()
	default:
		err = closeErr(err, s.req, s.next)
	}
	return s.failWith(err)
}

func (s *Subscription) failWith(err error) error {
	s.err = err
	return err
}

// Close ends the subscription: it sends close 1000, discards what still
// arrives until the server's echo (bounded), and closes the socket. A Recv
// blocked in another goroutine returns ErrClosed.
func (s *Subscription) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.watchMu.Lock()
		if s.stopWatch != nil {
			s.stopWatch()
			s.stopWatch = nil
		}
		s.watchCtx = nil
		s.watchMu.Unlock()
		if s.readMu.TryLock() {
			closeConn(s.conn)
			if s.err == nil {
				s.err = ErrClosed
			}
			s.readMu.Unlock()
			return
		}
		// A Recv is reading: say goodbye, then cut the socket under it.
		_ = s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(CloseNormal, ""), time.Now().Add(closeWait))
		s.conn.Close()
	})
	return nil
}

// readAll reads r to EOF into buf, growing it as needed.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// parseFrame splits a data frame [offset,ts,row] without encoding/json. It
// checks the frame's shape and that row is one object by its brackets (so
// [o,t,{},{}] is refused, not read as the row "{},{}"); the row's own JSON
// is checked only when it is decoded. bad says what is wrong.
func parseFrame(b []byte) (offset, ts int64, row []byte, bad string) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return Null, Null, nil, "a data frame is not a JSON array"
	}
	var ok bool
	if offset, i, ok = scanIntOrNull(b, skipSpace(b, i+1), false); !ok {
		return Null, Null, nil, "a data frame's offset is not a non-negative integer or null"
	}
	if i = skipSpace(b, i); i >= len(b) || b[i] != ',' {
		return Null, Null, nil, "a data frame is not [offset,ts,row]"
	}
	if ts, i, ok = scanIntOrNull(b, skipSpace(b, i+1), true); !ok {
		return Null, Null, nil, "a data frame's ts is not an integer or null"
	}
	if i = skipSpace(b, i); i >= len(b) || b[i] != ',' {
		return Null, Null, nil, "a data frame is not [offset,ts,row]"
	}
	start := skipSpace(b, i+1)
	end := len(b)
	for end > start && isSpace(b[end-1]) {
		end--
	}
	if end-start < 3 || b[end-1] != ']' {
		return Null, Null, nil, "a data frame is not [offset,ts,row]"
	}
	end--
	for end > start && isSpace(b[end-1]) {
		end--
	}
	if end-start < 2 || b[start] != '{' || b[end-1] != '}' {
		return Null, Null, nil, "a data frame's row is not a JSON object"
	}
	if objectEnd(b[:end], start) != end {
		// [o,t,{},{}] ends in '}' too: its "row" would be two objects.
		return Null, Null, nil, "a data frame is not [offset,ts,row]"
	}
	return offset, ts, b[start:end], ""
}

// objectEnd returns the index just past the '}' that closes the object
// opening at b[i], or -1 when b ends first. It counts brackets outside
// strings and checks nothing else: exact for JSON, and one pass over the
// row's bytes rather than a decode.
func objectEnd(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch rowByte[b[i]] {
		case 0:
			continue
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return i + 1
			}
		case '"':
			// To the closing quote: the next one not escaped, found with
			// IndexByte (most of a row's bytes are in its strings).
			for {
				k := bytes.IndexByte(b[i+1:], '"')
				if k < 0 {
					return -1
				}
				i += 1 + k
				if !escaped(b, i) {
					break
				}
			}
		}
	}
	return -1
}

// escaped reports whether the quote at b[i] is escaped: preceded by an odd
// run of backslashes. Inside a string the run cannot reach its opening
// quote, which is no backslash.
func escaped(b []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// rowByte classes the bytes objectEnd stops at: an opening and a closing
// bracket of either kind, and a quote. A table, because a data frame's
// every row byte passes through it. Never written.
var rowByte = [256]byte{'{': '{', '[': '{', '}': '}', ']': '}', '"': '"'}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// scanIntOrNull reads null or a decimal integer (negative only when signed).
func scanIntOrNull(b []byte, i int, signed bool) (int64, int, bool) {
	if i+4 <= len(b) && string(b[i:i+4]) == "null" {
		return Null, i + 4, true
	}
	neg := false
	if signed && i < len(b) && b[i] == '-' {
		neg = true
		i++
	}
	n, j, ok := scanUint(b, i)
	if !ok {
		return 0, j, false
	}
	if neg {
		n = -n
	}
	return n, j, true
}

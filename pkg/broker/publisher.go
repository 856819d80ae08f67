package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/broker/frame"
	"github.com/streamcast/streamcast/pkg/broker/marks"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// replySlot is the reply owed for one publish frame. Slots are answered in
// the order their frames arrived, whatever order they are resolved in.
type replySlot struct {
	frame []byte // the complete reply frame, once resolved
	done  bool
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
	eo *marks.Holder

	mu         sync.Mutex
	cond       sync.Cond    // the reader waits for in-flight room; shutdown waits for owed == 0
	slots      []*replySlot // replies owed and not yet queued, in send order
	ready      [][]byte     // scratch for queueing resolved replies
	owed       int          // frames queued or owed and not yet written (the greeting counts until written)
	peakOwed   int          // the most owed ever was: max_in_flight bounds it (tests observe the bound through it)
	stop       bool         // shutdown: read no more frames
	superseded bool         // a newer connection took the publisher id: read no more frames
	connDead   bool         // the writer failed: owed will never drain

	row schema.Row // reused across frames
	buf []byte     // reused read buffer
}

// newPublisher makes c a publisher connection of st; id is its exactly-once
// publisher id ("" for a plain publisher).
func newPublisher(c *wsConn, st *stream, id string) *publisher {
	// owed starts at 1: the greeting counts until it is written.
	p := &publisher{c: c, st: st, max: st.limits.MaxInFlight, owed: 1, id: id}
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

	if !st.addPublisherReader() {
		c.close(wire.CloseGoingAway, st.goingAwayReason())
		return
	}
	var mark *wire.PublisherMark
	if p.id != "" {
		m, ok := p.claim()
		defer st.marks.Release(p.eo)
		if !ok {
			st.life.pubReaders.Done()
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
	st.life.pubReaders.Done()

	switch {
	case stopping:
		// Shutdown: every frame read so far is committed and answered
		// before the 1001 (the committer drains after every reader stopped).
		p.waitOwed(30 * time.Second)
		c.close(wire.CloseGoingAway, st.goingAwayReason())
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
func (p *publisher) readFrames() (stopping bool) {
	c := p.c
	limit := p.st.limits.MaxMessageBytes
	for {
		p.mu.Lock()
		if p.owed >= p.max {
			c.holding.Store(true)
			for p.owed >= p.max && !p.stop && !p.connDead && !p.superseded {
				p.cond.Wait() // max_in_flight: stop reading this socket
			}
			c.holding.Store(false)
		}
		stop, dead := p.stop, p.connDead || p.superseded
		p.mu.Unlock()
		if stop {
			return true
		}
		if dead {
			return false
		}
		typ, r, err := c.ws.NextReader()
		if err != nil {
			return p.stopped()
		}
		c.reads.Add(1)
		data, tooBig, err := readMessage(r, p.buf, limit)
		p.buf = data[:0]
		if err != nil {
			return p.stopped()
		}
		if tooBig {
			reason := wire.CloseReason("too_big", wire.Field{Key: "max_message_bytes", Value: limit})
			c.close(wire.CloseTooBig, reason)
			return false
		}
		p.handle(typ, data)
	}
}

func (p *publisher) stopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stop
}

// readMessage reads one message into buf (reused), reporting tooBig when it
// exceeds limit bytes (the rest is left for gorilla to skip).
func readMessage(r io.Reader, buf []byte, limit int) ([]byte, bool, error) {
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			if len(buf) > limit {
				return buf[:0], true, nil
			}
			n := 2*cap(buf) + 512
			if n > limit+1 {
				n = limit + 1
			}
			if n <= cap(buf) {
				n = cap(buf) + 1
			}
			nb := make([]byte, len(buf), n)
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return buf[:0], true, nil
		}
		if err == io.EOF {
			return buf, false, nil
		}
		if err != nil {
			return buf[:0], false, err
		}
	}
}

// handle validates one frame and queues it for commit (durable) or delivers
// it (live-only); a frame that is not a row or whose rows the schema refuses
// is answered at once and commits nothing. The connection stays open.
func (p *publisher) handle(typ int, data []byte) {
	st := p.st
	var j *job
	var slot *replySlot
	if st.log != nil {
		j = &job{pub: p}
		j.reply = &replySlot{}
		slot = j.reply
	} else {
		slot = &replySlot{}
	}
	p.mu.Lock()
	p.slots = append(p.slots, slot)
	p.owed++
	p.peakOwed = max(p.peakOwed, p.owed)
	p.mu.Unlock()

	if typ != websocket.TextMessage {
		p.resolve(slot, frame.ErrorReply(wire.ReplyBadFrame, "publish frames are text frames of JSON; this one is binary"))
		return
	}
	var rows [][]byte
	if j != nil {
		rows = j.one[:0]
	}
	seq, rows, code, detail := p.decodeFrame(rows, data, p.eo != nil)
	if code != "" {
		p.resolve(slot, frame.ErrorReply(code, detail))
		return
	}
	if p.eo != nil {
		v, queue, a := st.marks.Judge(p.eo, &j.eo, seq, rows)
		switch v {
		case marks.Reply:
			p.resolve(slot, answerFrame(a))
			return
		case marks.Drop:
			p.resolve(slot, nil)
			return
		}
		j.rows = queue
	} else if j != nil {
		j.rows = rows
	}
	if j != nil {
		p.c.holding.Store(true) // put may wait for room under max_inbound
		ok := st.inbox.put(j)
		p.c.holding.Store(false)
		if !ok {
			p.resolve(slot, frame.ErrorReply(wire.ReplyCommitFailed, "the server is stopping this stream; nothing was committed, so sending these rows again is safe"))
			if j.eo.Marked() {
				st.marks.Unqueue(j)
			}
		}
		return
	}
	ts := st.srv.opts.Clock.Now().UnixMicro()
	st.deliver(frame.Encode(rows, wire.Null, ts), rows, wire.Null, wire.Null)
	p.resolve(slot, frame.OKReply(wire.Null, len(rows)))
}

// hasSeq reports whether a frame looks like an exactly-once frame: a list
// whose first element is a number.
func hasSeq(data []byte) bool {
	b := trimSpace(data)
	if len(b) < 2 || b[0] != '[' {
		return false
	}
	b = trimSpace(b[1:])
	return len(b) > 0 && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9'))
}

// decodeFrame decodes a publish frame: [seq, row] or [seq, [rows…]] from an
// exactly-once publisher, else a row or a list of rows. On failure it
// returns the reply's error code and detail. Whether the frame is valid JSON
// at all is asked only then, so a valid frame is parsed once; a frame that
// is not is a bad_frame saying where it stops being JSON.
func (p *publisher) decodeFrame(rows [][]byte, data []byte, exactlyOnce bool) (seq int64, _ [][]byte, code, detail string) {
	if exactlyOnce {
		seq, rows, code, detail = p.decodeSeq(rows, data)
	} else {
		rows, code, detail = p.decode(rows, data)
	}
	if code == "" {
		return seq, rows, "", ""
	}
	switch msg := syntaxError(data); {
	case msg != "":
		detail = msg
		code = wire.ReplyBadFrame
	case !exactlyOnce && code == wire.ReplyBadFrame && hasSeq(data):
		detail = "publish frame starts with a number, like an exactly-once [seq, row] frame, but this connection " +
			"has no publisher id; send the row(s) without a seq, or connect with &publisher=ID to a stream with exactly_once: true"
	}
	return 0, nil, code, detail
}

// decode splits and validates a publish frame into canonical rows (one
// allocation holds them all). On failure it returns the reply's error code
// and detail.
func (p *publisher) decode(rows [][]byte, data []byte) ([][]byte, string, string) {
	sch := p.st.sch
	b := trimSpace(data)
	if len(b) == 0 {
		return nil, wire.ReplyBadFrame, "publish frame is empty; send a row (a JSON object) or a list of rows"
	}
	switch b[0] {
	case '{':
		if err := sch.Decode(&p.row, b); err != nil {
			return nil, rowErrorCode(err, b), rowErrorDetail(-1, err, b)
		}
		row := append([]byte(nil), p.row.Canonical...)
		return append(rows, row), "", ""
	case '[':
		elems, err := splitArray(b)
		if err != nil {
			return nil, wire.ReplyBadFrame, "publish frame is not JSON: " + err.Error()
		}
		if len(elems) == 0 {
			return nil, wire.ReplyBadFrame, "publish frame is an empty list; send a row or a list of rows"
		}
		var arena []byte
		ends := make([]int, 0, len(elems))
		for i, e := range elems {
			if e[0] != '{' {
				return nil, wire.ReplyBadFrame, fmt.Sprintf("publish frame holds %s at position %d, not a row (a JSON object)", jsonKind(e[0]), i)
			}
			if err := sch.Decode(&p.row, e); err != nil {
				return nil, rowErrorCode(err, e), rowErrorDetail(i, err, e)
			}
			if arena == nil {
				arena = make([]byte, 0, len(p.row.Canonical)*len(elems)+64)
			}
			arena = append(arena, p.row.Canonical...)
			ends = append(ends, len(arena))
		}
		start := 0
		for _, end := range ends {
			rows = append(rows, arena[start:end:end])
			start = end
		}
		return rows, "", ""
	default:
		return nil, wire.ReplyBadFrame, fmt.Sprintf("publish frame is %s, not a row (a JSON object) or a list of rows", jsonKind(b[0]))
	}
}

// syntaxError says where data stops being valid JSON, with the byte
// position, or "" when it is valid JSON. JSON that encoding/json gives up
// on for its nesting (past 10,000 levels) counts as valid here: it is, and
// the decoder's answer (nested deeper than the schema package reads, with
// the limit) is the one that helps.
func syntaxError(data []byte) string {
	err := json.Unmarshal(data, new(json.RawMessage))
	if err == nil {
		return ""
	}
	var se *json.SyntaxError
	if errors.As(err, &se) && strings.HasSuffix(se.Error(), "exceeded max depth") {
		return ""
	}
	if errors.As(err, &se) {
		return fmt.Sprintf(notJSONPrefix+"%s at byte %d of %d; send a row (a JSON object) or a list of rows", se, se.Offset, len(data))
	}
	return notJSONPrefix + err.Error()
}

// notJSONPrefix starts the detail of a frame that is not valid JSON.
const notJSONPrefix = "publish frame is not valid JSON: "

// rowErrorCode maps a decode error: a row the schema refuses is "rejected";
// a row that is not JSON at all is "bad_frame" (checked only on this error
// path, so valid rows are parsed once).
func rowErrorCode(err error, row []byte) string {
	var re *schema.RowError
	if errors.As(err, &re) && syntaxError(row) == "" {
		return wire.ReplyRejected
	}
	return wire.ReplyBadFrame
}

func rowErrorDetail(i int, err error, row []byte) string {
	msg := err.Error()
	if rowErrorCode(err, row) == wire.ReplyBadFrame {
		msg = "publish frame is not JSON: " + msg
	}
	if i >= 0 {
		return "row " + strconv.Itoa(i) + " of the batch: " + msg + "; nothing in the batch was committed"
	}
	return msg
}

// jsonKind names the JSON value starting with c, for a person.
func jsonKind(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return "a number"
		}
		return "something that is not JSON"
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// splitArray returns the top-level elements of the JSON array b (trimmed).
// It checks structure only (brackets, strings); each element is validated by
// the schema.
func splitArray(b []byte) ([][]byte, error) {
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, errors.New("a list must start with [ and end with ]")
	}
	inner := b[1 : len(b)-1]
	var elems [][]byte
	depth := 0
	start := 0
	inStr := false
	for i := 0; i < len(inner); i++ {
		ch := inner[i]
		if inStr {
			switch ch {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch ch {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("unbalanced %q at byte %d", ch, i+1)
			}
		case ',':
			if depth == 0 {
				e := trimSpace(inner[start:i])
				if len(e) == 0 {
					return nil, fmt.Errorf("empty element before byte %d", i+1)
				}
				elems = append(elems, e)
				start = i + 1
			}
		}
	}
	if inStr {
		return nil, errors.New("unterminated string")
	}
	if depth != 0 {
		return nil, errors.New("unbalanced brackets")
	}
	e := trimSpace(inner[start:])
	if len(e) == 0 {
		if len(elems) > 0 {
			return nil, errors.New("trailing comma")
		}
		return nil, nil
	}
	return append(elems, e), nil
}

// resolve answers slot and queues every reply now answerable in send order.
// A nil frame answers nothing (a superseded connection's frame, dropped: the
// 4409 that follows tells the peer).
func (p *publisher) resolve(slot *replySlot, frame []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	slot.frame, slot.done = frame, true
	k := 0
	for k < len(p.slots) && p.slots[k].done {
		if f := p.slots[k].frame; f != nil {
			p.ready = append(p.ready, f)
		} else {
			p.owed--
			p.cond.Broadcast()
		}
		p.slots[k].frame = nil
		k++
	}
	if k == 0 {
		return
	}
	n := copy(p.slots, p.slots[k:])
	clear(p.slots[n:])
	p.slots = p.slots[:n]
	// Queued under p.mu so two resolvers (committer, reader) keep the order.
	if len(p.ready) > 0 {
		p.c.enqueue(p.ready...)
	}
	clear(p.ready)
	p.ready = p.ready[:0]
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

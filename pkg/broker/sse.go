package broker

// Server-Sent Events: a GET of /<stream> without an Upgrade, whose Accept
// allows text/event-stream, is a subscriber like a WebSocket one. It goes
// through the same admission, subscribe (I2), queue and max_backlog bound
// (I5) and replay as a wsConn, because it is one: a wsConn with no gorilla
// connection whose socket is an eventWriter. The writer hands it the
// WebSocket frames it would hand a socket, the live ones shared by every
// subscriber (I4), and the eventWriter re-frames each one's payload as an
// event without encoding the row again: the greeting as `event: greeting`,
// a data frame [offset,ts,row] as an event with `id: offset` and the frame
// as its data, a ping as a `: keepalive` comment, and the close frame as
// the HTTP status and JSON reason when nothing was sent yet, or as a final
// `event: close` after. docs/protocol.md has the whole mapping.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/broker/auth"
	"github.com/streamcast/streamcast/pkg/wire"
)

// EventRetry is the reconnection delay an event stream asks its client
// for (the SSE retry: field, sent with the greeting): a browser's
// EventSource waits this long before it reconnects with Last-Event-ID.
const EventRetry = 2 * time.Second

// CloseCodeHeader names the close code of a refusal answered before an
// event stream started: the HTTP status gives its class (1001 and 1013
// are both 503), the header the exact code.
const CloseCodeHeader = "Streamcast-Close-Code"

// wantsEvents reports whether r asks for a stream as Server-Sent Events: a
// GET without a WebSocket upgrade whose Accept header allows
// text/event-stream (by name, text/* or */*) at least as much as
// text/html. curl's `Accept: */*` and EventSource's `text/event-stream`
// get the stream; a browser's address bar, which prefers text/html, and a
// request with no Accept header at all get the plain answer.
func wantsEvents(r *http.Request) bool {
	if r.Method != http.MethodGet || websocket.IsWebSocketUpgrade(r) {
		return false
	}
	accept := r.Header.Values("Accept")
	if len(accept) == 0 {
		return false
	}
	events := acceptQuality(accept, "text", "event-stream")
	return events > 0 && events >= acceptQuality(accept, "text", "html")
}

// acceptQuality is the quality an Accept header gives typ/sub: the q of
// its most specific matching media range (typ/sub, typ/*, then */*), 0
// when none matches.
func acceptQuality(accept []string, typ, sub string) float64 {
	best, q := -1, 0.0
	for _, line := range accept {
		for _, r := range strings.Split(line, ",") {
			media, params, _ := strings.Cut(r, ";")
			t, s, _ := strings.Cut(strings.TrimSpace(media), "/")
			spec := -1
			switch {
			case strings.EqualFold(t, typ) && strings.EqualFold(s, sub):
				spec = 2
			case strings.EqualFold(t, typ) && s == "*":
				spec = 1
			case t == "*" && s == "*":
				spec = 0
			}
			if spec <= best {
				continue
			}
			best, q = spec, 1
			for _, p := range strings.Split(params, ";") {
				k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(k, "q") {
					if f, err := strconv.ParseFloat(v, 64); err == nil {
						q = f
					}
				}
			}
		}
	}
	return q
}

// serveEvents serves a stream as Server-Sent Events (wantsEvents). Every
// refusal before the stream starts is an HTTP status with a JSON body:
// 403 for an origin allowed_origins does not admit, 401/403 for missing
// credentials or grants (as the gate answers a WebSocket upgrade), then
// the close codes' statuses (eventStatus).
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	if msg := s.originRefusal(r); msg != "" {
		http.Error(w, msg, http.StatusForbidden)
		return
	}
	acc := auth.AccessOf(r)
	if stream, action := auth.StreamAction(r); !acc.Allows(action, stream) {
		s.gate.Refuse(w, acc, fmt.Sprintf("%s stream %q", action, stream))
		return
	}
	// An EventSource that reconnects while the server starts must not
	// meet a 503: it would give up for good. It waits for the start.
	if !s.awaitStart(r.Context()) {
		return
	}
	if s.state.Load() != stateReady || !s.track() {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "streamcast is starting or stopping; retry shortly", http.StatusServiceUnavailable)
		return
	}
	defer s.untrack()
	q, qerr := wire.ParseRequest(r.URL.Path, r.URL.RawQuery)
	if qerr == nil && q.Publish {
		qerr = &wire.BadRequest{Detail: "an event stream only reads; publish over WebSocket (?publish)"}
	}
	if id := r.Header.Get("Last-Event-ID"); qerr == nil && id != "" {
		// An EventSource reconnecting sends the URL it first opened,
		// ?offset and all, and the id of the last event it received:
		// the id wins, so the stream goes on after it.
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || n < 0 || strings.HasPrefix(id, "+") {
			qerr = &wire.BadRequest{Detail: fmt.Sprintf("Last-Event-ID %.20q is not an offset", id)}
		} else {
			q.Offset = n + 1
		}
	}
	ev := newEventWriter(w, r)
	st := s.reg.Get(q.Stream)
	ctx, cancel := context.WithCancel(context.Background())
	c := &wsConn{srv: s, nc: ev, raw: eventAbort{ev}, sealed: true, events: ev, st: st, ctx: ctx, cancel: cancel, began: time.Now()}
	ev.alive = &c.reads
	s.serveConn(c, st, q, qerr, acc)
	if !ev.aborted.Load() {
		// The connection's close grace must not outlive the response
		// on a connection net/http keeps for the client's next request.
		_ = ev.rc.SetWriteDeadline(time.Time{})
	}
}

// eventStatus is the HTTP status of a refusal's close code, for an event
// stream refused before it started. The 44xx codes mirror their HTTP
// cousins (4404 → 404, 4416 → 416, 4429 → 429); the RFC 6455 ones map to
// the status of the same meaning.
func eventStatus(code int) int {
	switch {
	case code >= 4400 && code < 4500:
		return code - 4000
	case code == websocket.CloseGoingAway, code == closeTryAgainLater:
		return http.StatusServiceUnavailable
	case code == wire.CloseTooBig:
		return http.StatusRequestEntityTooLarge
	case code == websocket.ClosePolicyViolation:
		return http.StatusBadRequest
	default:
		return http.StatusInternalServerError
	}
}

// eventWriter is the socket of an event stream's wsConn: it takes the
// server-built WebSocket frames the connection writes (whole frames, as
// the writer, the replay and the coalescing write hand them over) and
// writes their payloads as events, flushed once per write: a batch of
// queued frames, a replay chunk. One goroutine writes at a time, the
// connection's socket owner; Close and the abort may come from any.
type eventWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	r  *http.Request

	// alive is the connection's count of frames read from the peer, which
	// keepalive watches: an event stream's peer sends nothing, so each
	// keep-alive comment the stream takes counts instead, and a peer whose
	// socket takes none is dropped as a silent WebSocket peer is.
	alive *atomic.Int64

	started bool   // the 200 and the event-stream headers are sent; writer only
	closed  bool   // the close (event or refusal) is written; writer only
	carry   []byte // a frame cut short at the end of a write; writer only
	out     []byte // the events of the write in progress; writer only

	aborted atomic.Bool // the stream was cut (eventAbort)
	endOnce sync.Once
	ended   chan struct{} // closed once the stream has nothing more to send
}

func newEventWriter(w http.ResponseWriter, r *http.Request) *eventWriter {
	return &eventWriter{w: w, rc: http.NewResponseController(w), r: r, ended: make(chan struct{})}
}

// Write writes the events of the frames in b. It takes b whole or fails.
func (ev *eventWriter) Write(b []byte) (int, error) {
	if ev.closed {
		return len(b), nil
	}
	rest := b
	if len(ev.carry) > 0 {
		rest = append(ev.carry, b...)
		ev.carry = nil
	}
	out := ev.out[:0]
	pinged := false
	for len(rest) > 0 && !ev.closed {
		op, payload, n := cutFrame(rest)
		if n == 0 {
			ev.carry = append([]byte(nil), rest...)
			break
		}
		rest = rest[n:]
		switch op {
		case wire.OpPing:
			// A comment keeps proxies from ending an idle stream. Before
			// the stream starts there is nothing to keep: a refusal may
			// still become an HTTP status.
			pinged = true
			if ev.started || len(out) > 0 {
				out = append(out, ": keepalive\n\n"...)
			}
		case wire.OpPong:
		case 0x8: // close
			code, reason := 1005, []byte(nil)
			if len(payload) >= 2 {
				code, reason = int(binary.BigEndian.Uint16(payload)), payload[2:]
			}
			if len(reason) == 0 {
				reason = []byte("{}")
			}
			if !ev.started && len(out) == 0 {
				ev.refuse(code, reason)
				continue
			}
			out = append(out, "event: close\ndata: {\"code\":"...)
			out = strconv.AppendInt(out, int64(code), 10)
			out = append(out, `,"reason":`...)
			out = append(out, reason...)
			out = append(out, "}\n\n"...)
			ev.closed = true
		default:
			out = appendEvent(out, payload)
		}
	}
	ev.out = out[:0]
	if pinged && ev.alive != nil {
		// Counted as the comment is handed over, not once flushed: the
		// next tick must see it however soon it comes. A client that
		// reads nothing blocks this write, takes no later comment, and is
		// dropped one tick later.
		ev.alive.Add(1)
	}
	if len(out) > 0 {
		if !ev.started {
			h := ev.w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no") // nginx: pass each event on as it comes
			ev.w.WriteHeader(http.StatusOK)
			ev.started = true
		}
		if _, err := ev.w.Write(out); err != nil {
			return 0, err
		}
		if err := ev.rc.Flush(); err != nil {
			return 0, err
		}
	}
	if cap(ev.out) > 1<<20 {
		ev.out = nil // a large replay chunk's buffer is not kept for an idle stream
	}
	if ev.closed {
		ev.done()
	}
	return len(b), nil
}

// refuse answers the request with a close's status and JSON reason, the
// stream not having started.
func (ev *eventWriter) refuse(code int, reason []byte) {
	h := ev.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set(CloseCodeHeader, strconv.Itoa(code))
	status := eventStatus(code)
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	ev.w.WriteHeader(status)
	_, _ = ev.w.Write(append(reason, '\n'))
	ev.closed = true
}

// appendEvent appends the event of a text frame's payload: the greeting
// (a JSON object) as `event: greeting`, a data frame [offset,ts,row] as a
// message whose id is its offset (none on a live-only stream, whose
// offset is null).
func appendEvent(out, payload []byte) []byte {
	if len(payload) > 0 && payload[0] == '{' {
		out = append(out, "event: greeting\n"...)
		if id, ok := greetingID(payload); ok {
			out = append(out, "id: "...)
			out = strconv.AppendInt(out, id, 10)
			out = append(out, '\n')
		}
		out = append(out, "retry: "...)
		out = strconv.AppendInt(out, EventRetry.Milliseconds(), 10)
		out = append(out, '\n')
	} else if i := bytes.IndexByte(payload, ','); i > 1 && payload[0] == '[' && payload[1] != 'n' {
		out = append(out, "id: "...)
		out = append(out, payload[1:i]...)
		out = append(out, '\n')
	}
	// Canonical JSON has no line break, but a data line must not hold one:
	// split where one would be, and the client joins the lines with \n.
	// IndexByte is vectorised; IndexAny, byte by byte, would cost a fifth
	// of the fan-out's CPU at 100 subscribers.
	for bytes.IndexByte(payload, '\n') >= 0 || bytes.IndexByte(payload, '\r') >= 0 {
		i := bytes.IndexAny(payload, "\r\n")
		out = append(out, "data: "...)
		out = append(out, payload[:i]...)
		out = append(out, '\n')
		payload = payload[i+1:]
	}
	out = append(out, "data: "...)
	out = append(out, payload...)
	return append(out, "\n\n"...)
}

// greetingID is the id the greeting event carries: the offset before the
// first row the stream sends (its replay's start, or the frontier for a
// live subscribe). An EventSource that reconnects before any row came
// sends it as Last-Event-ID and resumes where this stream began, not at
// the frontier of the moment it reconnects. A live-only stream has no
// offsets, and its greeting no id.
func greetingID(payload []byte) (int64, bool) {
	g, err := wire.ParseGreeting(payload)
	if err != nil {
		return 0, false
	}
	next := g.EndOffset
	if g.Replay != nil {
		next = g.Replay.Start
	}
	if next == wire.Null || next < 1 {
		return 0, false
	}
	return next - 1, true
}

// cutFrame reads the server frame at the start of b (unmasked, final):
// its opcode, payload and length, or n = 0 when b holds only part of it.
func cutFrame(b []byte) (op byte, payload []byte, n int) {
	if len(b) < 2 {
		return 0, nil, 0
	}
	op, h, size := b[0]&0x0f, 2, int(b[1]&0x7f)
	switch size {
	case 126:
		if len(b) < 4 {
			return 0, nil, 0
		}
		h, size = 4, int(binary.BigEndian.Uint16(b[2:]))
	case 127:
		if len(b) < 10 {
			return 0, nil, 0
		}
		h, size = 10, int(binary.BigEndian.Uint64(b[2:]))
	}
	if len(b)-h < size {
		return 0, nil, 0
	}
	return op, b[h : h+size], h + size
}

// wait returns once the stream has ended: its close was written, it was
// aborted, or the client went away.
func (ev *eventWriter) wait() {
	select {
	case <-ev.ended:
	case <-ev.r.Context().Done():
	}
}

func (ev *eventWriter) done() { ev.endOnce.Do(func() { close(ev.ended) }) }

// Close is the orderly end: the handler returns and net/http ends the
// response.
func (ev *eventWriter) Close() error {
	ev.done()
	return nil
}

// eventAbort is an event stream's raw connection: closing it cuts the
// stream at once, unblocking a write to a client that does not read.
type eventAbort struct{ *eventWriter }

func (a eventAbort) Close() error {
	a.aborted.Store(true)
	_ = a.rc.SetWriteDeadline(time.Now())
	a.done()
	return nil
}

func (ev *eventWriter) Read([]byte) (int, error) { return 0, net.ErrClosed }
func (ev *eventWriter) LocalAddr() net.Addr {
	if a, ok := ev.r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		return a
	}
	return eventAddr("")
}
func (ev *eventWriter) RemoteAddr() net.Addr { return eventAddr(ev.r.RemoteAddr) }

// SetDeadline and SetWriteDeadline bound the writes, as on a socket.
func (ev *eventWriter) SetDeadline(t time.Time) error      { return ev.SetWriteDeadline(t) }
func (ev *eventWriter) SetWriteDeadline(t time.Time) error { return ev.rc.SetWriteDeadline(t) }

// SetReadDeadline does nothing: nothing is read from an event stream's
// client, and its end is seen through the request's context.
func (ev *eventWriter) SetReadDeadline(time.Time) error { return nil }

// eventAddr is the client's address as net/http gives it.
type eventAddr string

func (a eventAddr) Network() string { return "tcp" }
func (a eventAddr) String() string  { return string(a) }

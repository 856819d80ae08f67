package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/streamcast/streamcast/pkg/wire"
)

// event is one dispatched event of a text/event-stream: its type (empty
// for the default "message") and its data lines joined with \n. Both are
// valid until the next call of eventReader.next.
type event struct {
	typ  []byte
	data []byte
}

// eventReader parses a text/event-stream by the WHATWG rules for the
// fields a client of streamcast needs: data (lines joined with \n), event,
// comments (keep-alives) skipped; id and retry are read and ignored, as an
// offset is read from the data frame itself. Lines end at \n or \r\n; a
// lone \r, which the server never sends, is not a line end here. It
// reads line by line from a bufio.Reader and copies each data line once.
type eventReader struct {
	br   *bufio.Reader
	line []byte // a line longer than br's buffer, put together
	ev   event
}

// maxEventBytes bounds one event's data, so a broken peer cannot grow the
// reader without end: far above any frame a server sends
// (limits.max_message_bytes).
const maxEventBytes = 64 << 20

func newEventReader(r io.Reader) *eventReader {
	return &eventReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// readLine returns the next line without its line end. A last line the
// stream ends without a line end is not returned: per the rules, an
// event is only dispatched by a blank line.
func (r *eventReader) readLine() ([]byte, error) {
	l, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		r.line = append(r.line[:0], l...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(r.line) > maxEventBytes {
				return nil, fmt.Errorf("an event stream line is over %d MiB", maxEventBytes>>20)
			}
			l, err = r.br.ReadSlice('\n')
			r.line = append(r.line, l...)
		}
		l = r.line
	}
	if err != nil {
		return nil, err
	}
	l = l[:len(l)-1]
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	return l, nil
}

// next returns the next event that carries data. io.EOF means the stream
// ended at an event's boundary, io.ErrUnexpectedEOF in the middle of one.
func (r *eventReader) next() (*event, error) {
	r.ev.typ, r.ev.data = r.ev.typ[:0], r.ev.data[:0]
	hasData := false
	pending := false // a field line read since the last dispatch
	for {
		l, err := r.readLine()
		if err != nil {
			if err == io.EOF && pending {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if len(l) == 0 { // dispatch
			if hasData {
				return &r.ev, nil
			}
			r.ev.typ = r.ev.typ[:0] // an event without data is dropped, its type with it
			pending = false
			continue
		}
		if l[0] == ':' { // a comment: the server's keep-alive
			continue
		}
		pending = true
		name, value := l, []byte(nil)
		if i := bytes.IndexByte(l, ':'); i >= 0 {
			name, value = l[:i], l[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(name) {
		case "data":
			if hasData {
				r.ev.data = append(r.ev.data, '\n')
			}
			if len(r.ev.data)+len(value) > maxEventBytes {
				return nil, fmt.Errorf("an event stream event is over %d MiB", maxEventBytes>>20)
			}
			r.ev.data = append(r.ev.data, value...)
			hasData = true
		case "event":
			r.ev.typ = append(r.ev.typ[:0], value...)
		}
	}
}

// sseSub is a bench subscriber over Server-Sent Events: GET /<stream>
// with Accept: text/event-stream, through net/http, read event by event.
// Every row it receives is a data frame [offset,ts,row], as a WebSocket
// subscriber's is; a close event ends it, a 4429 with *wire.TooSlow.
type sseSub struct {
	body   io.ReadCloser
	ev     *eventReader
	cancel context.CancelFunc // ends the request, and a read blocked in it
	stop   func() bool        // unhooks cancel from Recv's context
	msg    wire.Message
	next   int64
	// greeting is the stream's greeting event, parsed.
	greeting *wire.Greeting
}

// eventsURL is the http(s) URL of a ws(s) stream URL, without credentials
// (they go in a header), asking for offset when it is not wire.Null.
func eventsURL(rawURL string, offset int64) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	}
	u.User = nil
	if offset != wire.Null {
		q := u.Query()
		q.Set("offset", strconv.FormatInt(offset, 10))
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

// newEventsClient is the client every event-stream subscriber of a run
// shares: a connection each, held for the run.
func newEventsClient(dial wire.DialOptions, subscribers int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = max(subscribers, 2)
	tr.ReadBufferSize = 64 << 10
	tr.DisableCompression = true                // Accept-Encoding: gzip would ask for nothing the server does
	tr.ResponseHeaderTimeout = 10 * time.Second // as a WebSocket handshake's timeout
	if dial.TLS != nil {
		tr.TLSClientConfig = dial.TLS.Clone()
	}
	return &http.Client{Transport: tr}
}

// dialSSESub opens an event stream at offset (wire.Null: live, from the
// frontier) and reads its greeting. A refusal is the HTTP status and the
// JSON reason the server answered with.
func dialSSESub(ctx context.Context, client *http.Client, rawURL string, dial wire.DialOptions, offset int64) (*sseSub, error) {
	target, err := eventsURL(rawURL, offset)
	if err != nil {
		return nil, err
	}
	// The request outlives the dial: its own context, ended by Close or
	// by Recv's context.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, target, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	for k, v := range dial.Headers() {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "text/event-stream")
	stopDial := context.AfterFunc(ctx, cancel)
	defer stopDial()
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("event stream %s: %w", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("event stream %s: the server answered %s: %s", target, resp.Status, bytes.TrimSpace(b))
	}
	s := &sseSub{body: resp.Body, ev: newEventReader(resp.Body), cancel: cancel, next: wire.Null}
	ev, err := s.ev.next()
	if err == nil && string(ev.typ) != "greeting" {
		err = fmt.Errorf("the first event is %q, not the greeting: %.80s", ev.typ, ev.data)
	}
	var g *wire.Greeting
	if err == nil {
		g, err = wire.ParseGreeting(ev.data)
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("event stream %s: greeting: %w", target, err)
	}
	s.greeting, s.next = g, g.EndOffset
	if g.Replay != nil {
		s.next = g.Replay.Start
	}
	return s, nil
}

// Recv returns the next row. A close event ends the stream: a 4429 as
// *wire.TooSlow with the offset to resume at, any other with its code and
// reason.
func (s *sseSub) Recv(ctx context.Context) (*wire.Message, error) {
	if s.stop == nil {
		s.stop = context.AfterFunc(ctx, s.cancel)
	}
	for {
		ev, err := s.ev.next()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err == io.EOF {
				err = errors.New("the server ended the event stream without a close event")
			}
			return nil, err
		}
		switch string(ev.typ) {
		case "", "message":
			if err := parseDataFrame(ev.data, &s.msg); err != nil {
				return nil, err
			}
			if s.msg.Offset != wire.Null {
				s.next = s.msg.Offset + 1
			}
			return &s.msg, nil
		case "close":
			return nil, eventCloseError(ev.data)
		}
	}
}

// eventCloseError is the error of a close event's data,
// {"code":N,"reason":{…}}.
func eventCloseError(data []byte) error {
	var c struct {
		Code   int             `json:"code"`
		Reason json.RawMessage `json:"reason"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("a close event that is not {\"code\":N,\"reason\":{…}}: %.80s", data)
	}
	if c.Code == wire.CloseTooSlow {
		ts := wire.TooSlow{Offset: wire.Null, Behind: wire.Null}
		if json.Unmarshal(c.Reason, &ts) == nil {
			return &ts
		}
	}
	return fmt.Errorf("the server ended the event stream: %d %s", c.Code, c.Reason)
}

// parseDataFrame reads a data frame [offset,ts,row] into m without
// decoding the row: m.Row points into p. A null offset is wire.Null.
func parseDataFrame(p []byte, m *wire.Message) error {
	i := bytes.IndexByte(p, ',')
	j := -1
	if i > 0 {
		if k := bytes.IndexByte(p[i+1:], ','); k >= 0 {
			j = i + 1 + k
		}
	}
	if i < 1 || j < 0 || p[0] != '[' || p[len(p)-1] != ']' {
		return fmt.Errorf("not a data frame: %.80s", p)
	}
	off := int64(wire.Null)
	if o, err := strconv.ParseInt(string(p[1:i]), 10, 64); err == nil {
		off = o
	}
	*m = wire.Message{Offset: off, TS: wire.Null, Row: p[j+1 : len(p)-1]}
	return nil
}

// Resume is the offset of the next row expected.
func (s *sseSub) Resume() int64 { return s.next }

func (s *sseSub) Close() error {
	if s.stop != nil {
		s.stop()
	}
	s.cancel()
	return s.body.Close()
}

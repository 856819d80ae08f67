package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/gorilla/websocket"
)

// Publishing over plain HTTP: POST /<stream> with the rows as the body.
// The server answers each request with the reply a WebSocket publisher
// gets for one frame, as the response body, once the rows are on disk.

// Headers of an HTTP publish request.
const (
	// PublisherHeader names the exactly-once publisher id of an HTTP
	// publish (what &publisher=ID is to a WebSocket publisher).
	PublisherHeader = "Streamcast-Publisher"
	// SeqHeader is the seq of the first row of an HTTP publish by an
	// exactly-once publisher (the seq of a WebSocket [seq, rows] frame).
	SeqHeader = "Streamcast-Seq"
)

// Content types an HTTP publish body may have.
const (
	// ContentTypeJSON is a body of one row (a JSON object) or a non-empty
	// JSON array of rows: a WebSocket publish frame.
	ContentTypeJSON = "application/json"
	// ContentTypeNDJSON is a body of one row per line, blank lines skipped.
	ContentTypeNDJSON = "application/x-ndjson"
)

// Values of "error" in an HTTP publish answer that a WebSocket publisher
// meets as a close instead.
const (
	// ReplyTooBig: the body is over limits.max_message_bytes (413).
	ReplyTooBig = "too_big"
	// ReplyTooManyRows: the body holds more rows than limits.max_inbound (413).
	ReplyTooManyRows = "too_many_rows"
	// ReplyPublisherBusy: another connection or request publishes under the
	// same exactly-once publisher id right now (409).
	ReplyPublisherBusy = "publisher_busy"
	// ReplyUnsupportedType: the body is neither JSON nor NDJSON (415).
	ReplyUnsupportedType = "unsupported_media_type"
)

// HTTPPublisher publishes over plain HTTP (POST, on keep-alive
// connections) where a WebSocket cannot reach the server: a proxy that
// passes no upgrade, a host that blocks them. It takes the frames a
// Publisher takes and answers each with a settled Ack, one request at a
// time: requests of one exactly-once publisher id cannot overlap (the
// server refuses the second with publisher_busy), and rows of one loader
// must land in the order it sends them.
type HTTPPublisher struct {
	client   *http.Client
	tr       *http.Transport
	url      string // the stream's http(s) URL, without credentials
	header   http.Header
	req      Request
	greeting *Greeting
	seq      int64 // exactly-once: seq of the next row
	closed   bool
}

// PublishHTTP is Publish over plain HTTP: rawURL may be ws://, wss://,
// http:// or https:// (ws is sent as http, wss as https). It asks for the
// greeting with an empty POST, so a refusal (*StreamRetired,
// *StreamNotFound, *AccessDenied, …) is returned here. HTTPS_PROXY and
// HTTP_PROXY are honoured, as by any HTTP client. MaxInFlight and
// Coalesce do not apply: one request is in flight at a time.
func PublishHTTP(ctx context.Context, rawURL string, opts PublishOptions) (*HTTPPublisher, error) {
	u, req, err := resolveURL(rawURL, func(r *Request) error {
		if r.Offset != Null || r.Where != nil {
			return errors.New("a publisher takes no offset or where; remove them from the URL")
		}
		if r.Publisher != "" && opts.Publisher != "" && r.Publisher != opts.Publisher {
			return errors.New("publisher is given twice (in the URL and in the options); pass one")
		}
		if opts.Publisher != "" {
			r.Publisher = opts.Publisher
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	hdr := opts.header(u.User).Clone()
	if hdr == nil {
		hdr = http.Header{}
	}
	u.User = nil
	u.RawQuery = ""
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	}
	if req.Publisher != "" {
		if len(req.Publisher) > MaxPublisherBytes {
			return nil, fmt.Errorf("publisher id is %d bytes; give 1 to %d", len(req.Publisher), MaxPublisherBytes)
		}
		hdr.Set(PublisherHeader, req.Publisher)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// A batch is one body of up to max_message_bytes: written through
	// the default 4 KiB buffer it costs a system call per 4 KiB.
	tr.WriteBufferSize = 64 << 10
	if opts.TLS != nil {
		tr.TLSClientConfig = opts.TLS.Clone()
	}
	p := &HTTPPublisher{client: &http.Client{Transport: tr}, tr: tr, url: u.String(), header: hdr, req: req, seq: 1}
	body, status, err := p.post(ctx, nil)
	if err != nil {
		tr.CloseIdleConnections()
		return nil, err
	}
	if status != http.StatusOK {
		tr.CloseIdleConnections()
		return nil, p.refusal(status, body)
	}
	g, err := ParseGreeting(body)
	if err != nil {
		tr.CloseIdleConnections()
		return nil, err
	}
	if req.Publisher != "" {
		if g.Publisher == nil {
			tr.CloseIdleConnections()
			return nil, &ProtocolError{Msg: "the greeting of an exactly-once publisher carries no publisher mark"}
		}
		p.seq = g.Publisher.LastSeq + 1
	}
	p.greeting = g
	return p, nil
}

// Greeting returns the greeting the server answered the empty POST with.
func (p *HTTPPublisher) Greeting() *Greeting { return p.greeting }

// Submit publishes frame, a JSON object (one row) or a non-empty JSON
// array of objects (one batch), and returns its Ack, already settled: the
// request is answered only once the rows are on disk. A request once sent
// is waited for even when ctx ends, so the Ack says what became of it.
func (p *HTTPPublisher) Submit(ctx context.Context, frame []byte) (*Ack, error) {
	if p.closed {
		return nil, ErrClosed
	}
	rows, err := frameRows(frame, p.req.Publisher != "")
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a := &Ack{rows: rows, done: make(chan struct{})}
	body, status, err := p.post(context.WithoutCancel(ctx), frame)
	if err != nil {
		a.settle(nil, false, err)
		return a, nil
	}
	var r Reply
	perr := ParseReply(body, &r)
	switch {
	case perr == nil && r.Error == "" && status == http.StatusOK:
		if rows > 0 && len(r.OK) != rows {
			a.settle(nil, false, &ProtocolError{Msg: fmt.Sprintf("a %d-row publish was answered with %d offsets", rows, len(r.OK))})
			break
		}
		p.seq += int64(len(r.OK))
		a.settle(r.OK, r.Duplicate, nil)
	case perr == nil && (r.Error == ReplyRejected || r.Error == ReplyCommitFailed || r.Error == ReplySequenceGap || r.Error == ReplyBadFrame):
		a.settle(nil, false, r.Err())
	default:
		a.settle(nil, false, p.refusal(status, body))
	}
	return a, nil
}

// Flush does nothing: every Submit has been sent and answered.
func (p *HTTPPublisher) Flush() {}

// Close lets the keep-alive connections go.
func (p *HTTPPublisher) Close() error {
	p.closed = true
	p.tr.CloseIdleConnections()
	return nil
}

// post sends one request (an empty body asks for the greeting) and
// returns the answer's status and body.
func (p *HTTPPublisher) post(ctx context.Context, body []byte) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, fmt.Errorf("publish to %s: %w", p.url, err)
	}
	req.Header = p.header.Clone()
	req.Header.Set("Content-Type", ContentTypeJSON)
	if p.req.Publisher != "" && len(body) > 0 {
		req.Header.Set(SeqHeader, strconv.FormatInt(p.seq, 10))
	}
	res, err := p.client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("publish to %s: %w", p.url, tlsHint(err))
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxAnswerBytes))
	if err != nil {
		return nil, 0, fmt.Errorf("publish to %s: reading the answer: %w", p.url, err)
	}
	b = bytes.TrimSpace(b) // the newline after the reply: ParseReply's fast path takes the reply alone
	if res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden ||
		(res.StatusCode == http.StatusServiceUnavailable && !bytes.HasPrefix(b, []byte(`{`))) {
		return nil, 0, &AccessDenied{Status: res.StatusCode, URL: p.url, Stream: p.req.Stream, Publish: true,
			User: userOf(nil, nil, req.Header), RetryAfter: res.Header.Get("Retry-After")}
	}
	return b, res.StatusCode, nil
}

// maxAnswerBytes bounds an answer read: a reply lists an offset per row,
// about 20 bytes each, of at most a max_message_bytes body's rows.
const maxAnswerBytes = 64 << 20

// refusal is the error of an answer that is not a publish reply: the
// close a WebSocket publisher would have got, by the HTTP status.
func (p *HTTPPublisher) refusal(status int, body []byte) error {
	codes := map[int]int{
		http.StatusBadRequest:         CloseBadRequest,
		http.StatusNotFound:           CloseNoSuchStream,
		http.StatusGone:               CloseRetired,
		http.StatusPreconditionFailed: CloseExactlyOnceUnavailable,
		http.StatusMisdirectedRequest: CloseRelay,
		http.StatusServiceUnavailable: CloseGoingAway,
	}
	if code, ok := codes[status]; ok && bytes.HasPrefix(body, []byte(`{`)) {
		err := closeErr(&websocket.CloseError{Code: code, Text: string(bytes.TrimSpace(body))}, p.req, Null)
		if err != io.EOF {
			return err
		}
	}
	var r Reply
	if ParseReply(body, &r) == nil && r.Error != "" {
		d := r.Detail
		if d == "" {
			d = string(bytes.TrimSpace(body))
		}
		return fmt.Errorf("publish to %s: HTTP %d %s: %s", p.url, status, r.Error, d)
	}
	return fmt.Errorf("publish to %s: the server answered HTTP %d (%s), not a publish reply; is this a streamcast URL?", p.url, status, clip(bytes.TrimSpace(body), 80))
}

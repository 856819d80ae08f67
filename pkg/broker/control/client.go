package control

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/streamcast/streamcast/pkg/wire"
)

// Client speaks the control API for `streamcast streams`. Every mutation
// carries an Idempotency-Key derived from the request itself (method,
// path, body and precondition), so a command that is run again after a
// lost answer sends the same key and gets the first answer back instead
// of acting twice; a change made since has another ETag, and so another
// key. The client retries 429 and 503 (after Retry-After) and network
// errors with the same key, but not a dial that found no server
// (*Unreachable): that request reached nothing.
type Client struct {
	// Base is the server's URL, http(s)://host:port, without user info.
	Base string
	// User, when set, is sent with HTTP Basic authentication.
	User *url.Userinfo
	// HTTP is the client to use; nil is a client with a 30 s timeout.
	HTTP *http.Client
	// Retries bounds the retries of one request; 0 means 5.
	Retries int
}

// ClientError is a refusal the API answered, with its status.
type ClientError struct {
	Status int
	Body   ErrorBody
}

func (e *ClientError) Error() string {
	return fmt.Sprintf("%s (%d %s)", e.Body.Message, e.Status, e.Body.Code)
}

// CodeNoControlAPI is the code of a ClientError from a server that
// answered, but serves no control API (its config has no control:
// section): a plain 404 where the API's paths would be.
const CodeNoControlAPI = "no_control_api"

// NoStream is Get's error for a name the server serves no stream of.
type NoStream struct{ Name string }

func (e *NoStream) Error() string {
	return fmt.Sprintf("stream %q does not exist on this server; streamcast streams list shows the streams it serves, and streams apply FILE declares a new one", e.Name)
}

// Unreachable is the error of a request no server answered: nothing
// listens at Base (or its name does not resolve), so the request never
// reached one and nothing was done.
type Unreachable struct {
	Base string
	Err  error // the dial's error
}

func (e *Unreachable) Error() string {
	return fmt.Sprintf("no server answered at %s (%s): start one with streamcast serve, or give the address of the one that runs with --server URL", e.Base, cause(e.Err))
}

func (e *Unreachable) Unwrap() error { return e.Err }

// cause is the innermost error of err's chain, the one that says what
// happened ("connection refused") without the request around it.
func cause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// StreamView is GET /control/v1/streams/{name}'s answer.
type StreamView struct {
	Name string `json:"name"`
	// Source is SourceConfig for a stream of the server's config file,
	// which has no declaration, revision or ETag here; else SourceControl.
	Source      string      `json:"source"`
	Declaration Declaration `json:"declaration"`
	Desired     string      `json:"desired"`
	Observed    Observed    `json:"observed"`
	Revision    int64       `json:"revision"`
	StreamID    *string     `json:"stream_id"`
	Pending     *Operation  `json:"pending_operation"`
	ETag        string      `json:"-"`
}

// Accepted is a mutation's answer.
type Accepted struct {
	Status      string `json:"status"`
	OperationID string `json:"operation_id"`
	Revision    int64  `json:"revision"`
	HTTPStatus  int    `json:"-"`
}

// Page is one page of the stream list.
type Page struct {
	Revision   int64             `json:"revision"`
	Streams    []json.RawMessage `json:"streams"`
	NextCursor *string           `json:"next_cursor"`
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second}
}

// do sends one request, retrying what is safe to retry, and decodes a
// 2xx body into out.
func (c *Client) do(ctx context.Context, method, path string, body []byte, hdr http.Header, out any) (http.Header, int, error) {
	retries := c.Retries
	if retries <= 0 {
		retries = 5
	}
	var last error
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Base, "/")+path, bytes.NewReader(body))
		if err != nil {
			return nil, 0, err
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if c.User != nil {
			pw, _ := c.User.Password()
			req.SetBasicAuth(c.User.Username(), pw)
		}
		resp, err := c.http().Do(req)
		wait := time.Duration(attempt+1) * 200 * time.Millisecond
		if err != nil {
			// A certificate no retry will make trusted: say so at once.
			if hinted := wire.TLSHint(err); hinted != err {
				return nil, 0, hinted
			}
			// Nothing listens there: the request reached no server, and a
			// retry a second later would find none either.
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				return nil, 0, &Unreachable{Base: c.Base, Err: err}
			}
		}
		if err == nil {
			b, rerr := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
			resp.Body.Close()
			switch {
			case rerr != nil:
				err = rerr
			case resp.StatusCode >= 200 && resp.StatusCode < 300:
				if out != nil {
					if err := json.Unmarshal(b, out); err != nil {
						return nil, resp.StatusCode, fmt.Errorf("the server's answer to %s %s is not the JSON expected: %w", method, path, err)
					}
				}
				return resp.Header, resp.StatusCode, nil
			default:
				var eb struct {
					Error ErrorBody `json:"error"`
				}
				switch {
				case json.Unmarshal(b, &eb) == nil && eb.Error.Code != "":
				case resp.StatusCode == http.StatusBadRequest && strings.Contains(string(b), "HTTPS server"):
					eb.Error = ErrorBody{Code: "https_only", Message: fmt.Sprintf("the server at %s speaks https only; give --server https://… (a config with the server's tls: section does)", c.Base)}
				case resp.StatusCode == http.StatusNotFound:
					// Not the API's JSON: the server has no control: section.
					eb.Error = ErrorBody{Code: CodeNoControlAPI, Message: fmt.Sprintf("the server at %s serves no control API (%s): its config needs a control: section, "+
						"and the registry streamcast control init makes; streamcast streams list still lists the streams it serves, from its /stats", c.Base, Prefix)}
				default:
					eb.Error = ErrorBody{Code: "http", Message: strings.TrimSpace(string(b))}
				}
				cerr := &ClientError{Status: resp.StatusCode, Body: eb.Error}
				if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
					return resp.Header, resp.StatusCode, cerr
				}
				err = cerr
				if s := resp.Header.Get("Retry-After"); s == "1" {
					wait = time.Second
				}
			}
		}
		last = err
		if attempt >= retries || ctx.Err() != nil {
			return nil, 0, last
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// Key is the Idempotency-Key the client sends for a request: the same
// request (method, path, body, precondition) gets the same key.
func Key(method, path string, body []byte, precondition string) string {
	var compact bytes.Buffer
	if json.Compact(&compact, body) != nil {
		compact.Write(body)
	}
	h := sha256.New()
	for _, p := range []string{method, path, compact.String(), precondition} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "cli-" + hex.EncodeToString(h.Sum(nil))[:40]
}

func (c *Client) mutate(ctx context.Context, method, path string, body []byte, ifMatch string) (*Accepted, error) {
	hdr := http.Header{}
	pre := "*"
	if ifMatch == "" {
		hdr.Set("If-None-Match", "*")
	} else {
		hdr.Set("If-Match", ifMatch)
		pre = ifMatch
	}
	hdr.Set("Idempotency-Key", Key(method, path, body, pre))
	var a Accepted
	_, status, err := c.do(ctx, method, path, body, hdr, &a)
	if err != nil {
		return nil, err
	}
	a.HTTPStatus = status
	return &a, nil
}

// Get reads one stream the server serves or has registered; a *NoStream
// when there is none of that name.
func (c *Client) Get(ctx context.Context, name string) (*StreamView, error) {
	var v StreamView
	h, _, err := c.do(ctx, http.MethodGet, Prefix+"/streams/"+url.PathEscape(name), nil, nil, &v)
	var ce *ClientError
	if errors.As(err, &ce) && ce.Status == http.StatusNotFound && ce.Body.Code == "not_found" {
		return nil, &NoStream{Name: name}
	}
	if err != nil {
		return nil, err
	}
	v.ETag = h.Get("ETag")
	return &v, nil
}

// List reads one page of streams.
func (c *Client) List(ctx context.Context, cursor string, limit int) (*Page, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	var p Page
	path := Prefix + "/streams"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	_, _, err := c.do(ctx, http.MethodGet, path, nil, nil, &p)
	return &p, err
}

// Put creates (etag "") or replaces (etag the stream's) a declaration.
func (c *Client) Put(ctx context.Context, name string, decl json.RawMessage, etag string) (*Accepted, error) {
	return c.mutate(ctx, http.MethodPut, Prefix+"/streams/"+url.PathEscape(name), decl, etag)
}

// SetDesired sets a stream's desired state.
func (c *Client) SetDesired(ctx context.Context, name, state, etag string) (*Accepted, error) {
	body, _ := json.Marshal(desiredBody{State: state})
	return c.mutate(ctx, http.MethodPut, Prefix+"/streams/"+url.PathEscape(name)+"/desired", body, etag)
}

// Migrate asks for a migration of the stream to m.
func (c *Client) Migrate(ctx context.Context, name string, m Migration, etag string) (*Accepted, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return c.mutate(ctx, http.MethodPost, Prefix+"/streams/"+url.PathEscape(name)+"/migrations", body, etag)
}

// Operation reads an operation.
func (c *Client) Operation(ctx context.Context, id string) (*Operation, error) {
	var op Operation
	_, _, err := c.do(ctx, http.MethodGet, Prefix+"/operations/"+url.PathEscape(id), nil, nil, &op)
	return &op, err
}

// ErrOperationFailed is wrapped by Wait's error for a failed operation.
var ErrOperationFailed = errors.New("the operation failed")

// Wait polls an operation every interval until it succeeds or fails.
func (c *Client) Wait(ctx context.Context, id string, every time.Duration) (*Operation, error) {
	for {
		op, err := c.Operation(ctx, id)
		if err != nil {
			return nil, err
		}
		switch op.Status {
		case StatusSucceeded:
			return op, nil
		case StatusFailed:
			msg := "no reason given"
			if op.Error != nil {
				msg = op.Error.Message
			}
			return op, fmt.Errorf("%w: operation %s (%s of %s): %s", ErrOperationFailed, op.ID, op.Kind, op.Stream, msg)
		}
		select {
		case <-ctx.Done():
			return op, ctx.Err()
		case <-time.After(every):
		}
	}
}

package wire

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// ErrClosed is returned by a Subscription or Publisher used after its Close.
var ErrClosed = errors.New("wire: connection closed by this client")

// DefaultMaxInFlight is the number of publish frames a Publisher keeps
// unanswered, the server's default max_in_flight.
const DefaultMaxInFlight = 64

// DefaultReadLimit is the largest frame a client accepts (the server's
// default transport ceiling).
const DefaultReadLimit = 1 << 20

// closeWait bounds how long Close waits for the server's close echo.
const closeWait = 2 * time.Second

// DialOptions are the connection settings shared by Subscribe and Publish.
type DialOptions struct {
	Header http.Header // extra handshake headers
	// Dialer nil is a dialer with 64 KiB buffers, a 10 s handshake
	// timeout and permessage-deflate as Compression says. One of the
	// caller's with EnableCompression set lets the server compress with
	// context takeover too, unless it sets NetDialTLSContext (the
	// inflating connection must sit above TLS) or a proxy applies to the
	// URL; Compression does not apply to it.
	Dialer *websocket.Dialer
	// Compression says whether the default dialer offers
	// permessage-deflate; the zero value is CompressAuto.
	Compression Compression
	ReadLimit   int64 // largest message accepted, a compressed one's inflated size; 0 = DefaultReadLimit
	// TLS configures wss:// connections: the CAs trusted (RootCAs), a
	// client certificate for mutual TLS (Certificates). nil verifies the
	// server against the system's CAs. It is the Dialer's TLSClientConfig
	// unless the Dialer has one of its own.
	TLS *tls.Config

	// OnHandshake, when set, is called with the headers of the server's
	// 101 answer, before the greeting is read: a relay reads the
	// server's RelayChainHeader there.
	OnHandshake func(http.Header)

	// Credentials, when set, are sent as HTTP Basic authentication on the
	// handshake. A stream URL's user info (ws://user:pass@host/…,
	// percent-encoded) takes their place; either way the URL is dialled,
	// and named in errors, without it.
	Credentials *url.Userinfo
}

// Headers are the headers a request to the server sends: Header, plus
// Authorization when Credentials are set. Clients that read the server's
// plain HTTP routes (/stats) with the options of a stream send these.
func (o *DialOptions) Headers() http.Header { return o.header(nil) }

// header is the handshake's headers: Header, plus Authorization when
// there are credentials (those of the URL, else Credentials).
func (o *DialOptions) header(fromURL *url.Userinfo) http.Header {
	cred := o.Credentials
	if fromURL != nil {
		cred = fromURL
	}
	if cred == nil {
		return o.Header
	}
	h := o.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Authorization", BasicAuthorization(cred))
	return h
}

// SplitCredentials takes the user info out of a URL: it returns the URL
// without it, and the user name and password it held, percent-decoded
// (nil when it held none). gorilla/websocket refuses to dial a URL with
// user info, and a URL with credentials must never be printed, so clients
// split them off before anything else sees the URL. An error never quotes
// the URL.
func SplitCredentials(raw string) (string, *url.Userinfo, error) {
	if !strings.Contains(raw, "@") {
		return raw, nil, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", nil, errors.New("the stream URL does not parse (not repeated here: it may hold a password); percent-encode any ':', '@', '/' or '%' in the user name and password, as in ws://user:p%40ss@host:8765/stream")
	}
	cred := u.User
	u.User = nil
	return u.String(), cred, nil
}

// Compression is whether a client offers permessage-deflate, with server
// context takeover: rows arrive in about a fifth of their bytes, and each
// one the server replays costs it several times the CPU of a plain one
// (docs/benchmarks.md#compression). Over loopback the bytes cost nothing,
// so the default offers it only to a server on another host.
type Compression int

const (
	// CompressAuto offers compression unless the URL's host is localhost
	// or a loopback address.
	CompressAuto Compression = iota
	// CompressOn always offers it.
	CompressOn
	// CompressOff never does.
	CompressOff
)

// ParseCompression reads a Compression as a flag gives it: "auto", "on"
// or "off".
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "auto":
		return CompressAuto, nil
	case "on":
		return CompressOn, nil
	case "off":
		return CompressOff, nil
	}
	return 0, fmt.Errorf("compression %q is not auto, on or off", s)
}

// String returns c as ParseCompression reads it.
func (c Compression) String() string {
	switch c {
	case CompressOn:
		return "on"
	case CompressOff:
		return "off"
	}
	return "auto"
}

// offered reports whether c offers compression to the server of u; a nil
// u counts as another host.
func (c Compression) offered(u *url.URL) bool {
	switch c {
	case CompressOn:
		return true
	case CompressOff:
		return false
	}
	if u == nil {
		return true
	}
	host := u.Hostname()
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// dialer returns the dialer for a connection to u (nil when not known).
func (o *DialOptions) dialer(u *url.URL) *websocket.Dialer {
	if o.Dialer != nil {
		if o.TLS == nil || o.Dialer.TLSClientConfig != nil {
			return o.Dialer
		}
		d := *o.Dialer
		d.TLSClientConfig = o.TLS
		return &d
	}
	// EnableCompression offers permessage-deflate: a publisher's batches
	// go out compressed (Publisher.writeFrame), and the connection, dialled
	// through an inflateConn (takeoverDialer), lets the server compress
	// with context takeover.
	return &websocket.Dialer{
		Proxy:             http.ProxyFromEnvironment,
		HandshakeTimeout:  10 * time.Second,
		ReadBufferSize:    64 << 10,
		WriteBufferSize:   64 << 10,
		TLSClientConfig:   o.TLS,
		EnableCompression: o.Compression.offered(u),
	}
}

// resolveURL parses a stream URL (ws, wss, or http/https which map to ws/wss),
// reads any request already in its query, and lets merge add the options'
// parts, refusing a part given twice.
func resolveURL(raw string, merge func(*Request) error) (*url.URL, Request, error) {
	u, err := url.Parse(raw)
	if err != nil {
		if strings.Contains(raw, "@") {
			_, _, err = SplitCredentials(raw)
			return nil, Request{}, err
		}
		return nil, Request{}, fmt.Errorf("stream URL %q: %w", raw, err)
	}
	// From here on raw is named only by redact(u), which drops user info.
	raw = redact(u)
	switch u.Scheme {
	case "ws", "wss":
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return nil, Request{}, fmt.Errorf("stream URL %q: scheme %q is not ws, wss, http or https", raw, u.Scheme)
	}
	if u.Host == "" {
		return nil, Request{}, fmt.Errorf("stream URL %q has no host; write it as ws://host:port/stream", raw)
	}
	req, err := ParseRequest(u.Path, u.RawQuery)
	if err != nil {
		return nil, Request{}, fmt.Errorf("stream URL %q: %w", raw, err)
	}
	if err := merge(&req); err != nil {
		return nil, Request{}, fmt.Errorf("stream URL %q: %w", raw, err)
	}
	u.RawQuery = req.Query()
	u.Fragment = ""
	return u, req, nil
}

// dialURL is u without its user info, as gorilla dials it.
func dialURL(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// connect resolves a stream URL with merge (see resolveURL), opens the
// WebSocket and reads the greeting: the start Subscribe and Publish share.
func connect(ctx context.Context, raw string, o *DialOptions, merge func(*Request) error) (*websocket.Conn, Request, *Greeting, error) {
	u, req, err := resolveURL(raw, merge)
	if err != nil {
		return nil, req, nil, err
	}
	conn, g, err := dial(ctx, u, req, o)
	if err != nil {
		return nil, req, nil, err
	}
	return conn, req, g, nil
}

// dial opens the WebSocket and reads the greeting. A close before the
// greeting is returned as the typed error of its code.
func dial(ctx context.Context, u *url.URL, req Request, o *DialOptions) (*websocket.Conn, *Greeting, error) {
	limit := o.ReadLimit
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	d := takeoverDialer(o.dialer(u), u, limit)
	hdr := o.header(u.User)
	conn, resp, err := d.DialContext(ctx, dialURL(u), hdr)
	if err != nil {
		if resp != nil {
			switch resp.StatusCode {
			case http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests, http.StatusServiceUnavailable:
				return nil, nil, &AccessDenied{Status: resp.StatusCode, URL: redact(u), Stream: req.Stream, Publish: req.Publish,
					User: userOf(u.User, o.Credentials, hdr), RetryAfter: resp.Header.Get("Retry-After")}
			}
			if u.Scheme == "ws" && resp.StatusCode == http.StatusBadRequest && plainToTLS(resp) {
				return nil, nil, fmt.Errorf("connect %s: the server speaks TLS only; use wss:// (or https://) in the URL", redact(u))
			}
			return nil, nil, fmt.Errorf("connect %s: the server answered HTTP %d, not a WebSocket upgrade; is this a streamcast URL?", redact(u), resp.StatusCode)
		}
		return nil, nil, fmt.Errorf("connect %s: %w", redact(u), tlsHint(err))
	}
	if o.OnHandshake != nil && resp != nil {
		o.OnHandshake(resp.Header)
	}
	conn.SetReadLimit(limit)
	stop := watch(ctx, conn)
	g, err := readGreeting(conn, req)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("waiting for the greeting from %s: %w", redact(u), ctx.Err())
		}
		conn.Close()
		return nil, nil, err
	}
	return conn, g, nil
}

// plainToTLS reports whether resp is a Go server's answer to plain HTTP
// sent to its TLS port.
func plainToTLS(resp *http.Response) bool {
	if resp.Body == nil {
		return false
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return strings.Contains(string(b), "HTTPS server")
}

// TLSHint is tlsHint, for the other clients of a server (the control
// API's): it adds the way out to a TLS failure, and returns any other
// error as it is.
func TLSHint(err error) error { return tlsHint(err) }

// tlsHint adds the way out to the TLS failures a user can fix from the
// client's side; other errors are returned as they are.
func tlsHint(err error) error {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var rec tls.RecordHeaderError
	// A peer's alert reaches the client as text only (crypto/tls keeps
	// its alert type unexported).
	msg := err.Error()
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("%w; the server's certificate is signed by a CA this client does not trust: give that CA's certificate (--ca-file)", err)
	case errors.As(err, &host):
		return fmt.Errorf("%w; connect by a name or address the server's certificate lists", err)
	case errors.As(err, &rec):
		return fmt.Errorf("%w; the server does not speak TLS: use ws:// (or http://) in the URL", err)
	case strings.Contains(msg, "remote error: tls: certificate required"), strings.Contains(msg, "remote error: tls: bad certificate"),
		strings.Contains(msg, "remote error: tls: unknown certificate authority"):
		return fmt.Errorf("%w; the server requires a client certificate signed by a CA it trusts (mutual TLS)", err)
	}
	return err
}

// watch makes a blocked read on conn return when ctx ends; stop undoes it.
func watch(ctx context.Context, conn *websocket.Conn) (stop func() bool) {
	if ctx.Done() == nil {
		return func() bool { return true }
	}
	return context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
}

func readGreeting(conn *websocket.Conn, req Request) (*Greeting, error) {
	typ, r, err := conn.NextReader()
	if err != nil {
		return nil, closeErr(err, req, Null)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, closeErr(err, req, Null)
	}
	if typ != websocket.TextMessage {
		return nil, &ProtocolError{Msg: "the first frame was binary; a streamcast greeting is text"}
	}
	return ParseGreeting(data)
}

// closeErr maps a read error to this package's errors: a close frame to the
// typed error of its code (nil would be a clean 1000, reported as io.EOF),
// with the fields only the client knows filled in.
func closeErr(err error, req Request, next int64) error {
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		return err
	}
	if ce.Code == websocket.CloseAbnormalClosure {
		return &CloseError{Code: ce.Code, Reason: "the connection ended without a close frame"}
	}
	e := ParseClose(ce.Code, ce.Text)
	switch e := e.(type) {
	case nil:
		return io.EOF
	case *StreamNotFound:
		e.Stream = req.Stream
	case *StreamRetired:
		e.Stream = req.Stream
	case *Superseded:
		if e.Publisher == "" {
			e.Publisher = req.Publisher
		}
	case *TooSlow:
		if e.Offset == Null {
			e.Offset = next
		}
	case *GoingAway:
		e.Offset = next
	case *NotReplayable:
		if e.Offset == Null && req.Offset != Null {
			e.Offset = req.Offset
		}
	}
	return e
}

// redact drops credentials from a URL for messages.
func redact(u *url.URL) string { return dialURL(u) }

// userOf names the user whose credentials the handshake sent; "" when it
// sent none, and "(from the Authorization header)" when they came in
// DialOptions.Header.
func userOf(fromURL, opt *url.Userinfo, h http.Header) string {
	switch {
	case fromURL != nil:
		return fromURL.Username()
	case opt != nil:
		return opt.Username()
	case h.Get("Authorization") != "":
		return "(from the Authorization header)"
	}
	return ""
}

// isNetClosed reports an error from using a connection this side closed.
func isNetClosed(err error) bool {
	return errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "use of closed network connection")
}

// closeConn sends close 1000 and waits (bounded) for the peer's echo while
// discarding what still arrives, so the server sees a clean close; then it
// closes the socket. The caller must be the only reader of conn.
func closeConn(conn *websocket.Conn) {
	deadline := time.Now().Add(closeWait)
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(CloseNormal, ""), deadline)
	_ = conn.SetReadDeadline(deadline)
	for {
		_, r, err := conn.NextReader()
		if err != nil {
			break
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			break
		}
	}
	conn.Close()
}

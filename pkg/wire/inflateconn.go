package wire

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/gorilla/websocket"
)

// Server context takeover for gorilla/websocket's client.
//
// gorilla's Dialer offers permessage-deflate only without context
// takeover, and refuses an answer that grants the server context
// takeover; a streamcast server compresses with history only, so it would
// send this client plain frames. inflateConn, the net.Conn gorilla dials
// through, changes the offer to one that lets the server keep its context
// and, when the server grants it, inflates each compressed message itself,
// with history (Inflater), and hands gorilla the message as one plain
// frame. gorilla still does the handshake, reads every frame and
// compresses what the client sends, each message on its own, which the
// offer's client_no_context_takeover makes exact.
//
// It fails safe: if gorilla's offer line is not in the request (a gorilla
// that words it otherwise), or the server answers anything but a plain
// grant of context takeover (server_no_context_takeover, as an older
// streamcast or one with compression off does, or a parameter this client
// does not know), every byte reaches gorilla as it arrived, and gorilla
// accepts or refuses the answer as it would have its own offer's.

const (
	// gorillaOffer is the extension line gorilla's Dialer writes when
	// EnableCompression is set, and the one answer line it accepts.
	gorillaOffer = "Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover\r\n"
	// takeoverOffer replaces it in the request.
	takeoverOffer = "Sec-WebSocket-Extensions: permessage-deflate; client_no_context_takeover\r\n"
)

// maxHead bounds the handshake bytes held back to be rewritten: a request
// or answer whose head is longer passes as it is.
const maxHead = 64 << 10

var headEnd = []byte("\r\n\r\n")

// takeoverDialer returns d dialling through an inflateConn, which inflates
// messages of up to limit bytes, or d itself where the connection could
// not carry one above TLS: compression off, a TLS dial of the caller's, or
// a proxy for u (gorilla dials a proxy through the same functions).
func takeoverDialer(d *websocket.Dialer, u *url.URL, limit int64) *websocket.Dialer {
	if !d.EnableCompression || d.NetDialTLSContext != nil {
		return d
	}
	if d.Proxy != nil {
		scheme := "http"
		if u.Scheme == "wss" {
			scheme = "https"
		}
		if p, err := d.Proxy(&http.Request{URL: &url.URL{Scheme: scheme, Host: u.Host}}); err != nil || p != nil {
			return d
		}
	}
	dial := dialContextOf(d)
	nd := *d
	switch u.Scheme {
	case "ws":
		nd.NetDial = nil
		nd.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return newInflateConn(c, limit), nil
		}
	case "wss":
		// gorilla does TLS over what NetDialContext returns; the
		// inflateConn must read what TLS decrypted, so this dial does
		// the TLS handshake as gorilla would, then wraps the tls.Conn.
		cfg := d.TLSClientConfig
		nd.NetDialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			tc, err := tlsHandshake(ctx, c, cfg, u.Host)
			if err != nil {
				c.Close()
				return nil, err
			}
			return newInflateConn(tc, limit), nil
		}
	default:
		return d
	}
	return &nd
}

// tlsHandshake is gorilla's TLS handshake for a wss:// URL with host
// hostPort: the server name is the host without its port unless cfg names
// one.
func tlsHandshake(ctx context.Context, c net.Conn, cfg *tls.Config, hostPort string) (*tls.Conn, error) {
	if cfg == nil {
		cfg = &tls.Config{}
	} else {
		cfg = cfg.Clone()
	}
	if cfg.ServerName == "" {
		host := hostPort
		if i := strings.LastIndex(host, ":"); i > strings.LastIndex(host, "]") {
			host = host[:i]
		}
		cfg.ServerName = host
	}
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	if !cfg.InsecureSkipVerify {
		if err := tc.VerifyHostname(cfg.ServerName); err != nil {
			return nil, err
		}
	}
	return tc, nil
}

// readMode is what inflateConn.Read does with the bytes it reads.
type readMode uint8

const (
	readPass   readMode = iota // hand them on as they are
	readAnswer                 // collect the server's answer head to rewrite it
	readFrames                 // filter frames, inflating compressed messages
)

// inflateConn is the connection gorilla's client reads and writes through
// (see the top of this file). The write side holds back and rewrites the
// handshake request, then writes straight through. The read side is used
// by one goroutine at a time, as gorilla reads.
type inflateConn struct {
	net.Conn
	limit int // the largest inflated message: the client's read limit

	wrote bool   // the request went out; writes now go straight through
	req   []byte // the request's bytes, held until its head ends

	mode  readMode
	head  []byte // the answer's bytes, collected until its head ends
	pend  []byte // to hand on first: the answer's head, or an inflated frame's header
	body  []byte // then this: an inflated payload (the Inflater's, valid until its next call)
	stash []byte // bytes read but not filtered yet
	spare []byte // stash's buffer, reused
	err   error  // the connection's read error, returned once what came before it is handed on
	bad   error  // a compressed message that failed: every later Read returns it

	// The frame being read: its header (hn of hlen bytes seen), its
	// payload bytes still to come, and whether it belongs to a compressed
	// message (collected into msg rather than handed on).
	hdr      [14]byte
	hn, hlen int
	out      [10]byte // pend's buffer for an inflated frame's header
	left     int64
	inMsg    bool
	open     bool   // a compressed message began and has not ended
	op       byte   // its opcode
	msg      []byte // its compressed payload so far
	inf      Inflater
}

func newInflateConn(c net.Conn, limit int64) *inflateConn {
	return &inflateConn{Conn: c, limit: int(min(limit, 1<<30)), hlen: 2}
}

// Write holds back the handshake request until its head ends, then writes
// it with the offer rewritten; later writes go straight through.
func (c *inflateConn) Write(p []byte) (int, error) {
	if c.wrote {
		return c.Conn.Write(p)
	}
	c.req = append(c.req, p...)
	end := bytes.Index(c.req, headEnd)
	if end < 0 && len(c.req) < maxHead {
		return len(p), nil
	}
	c.wrote = true
	out := c.req
	if end >= 0 {
		if i := bytes.Index(out[:end+4], []byte(gorillaOffer)); i >= 0 {
			out = spliceLine(out, i, len(gorillaOffer), takeoverOffer)
			c.mode = readAnswer
		}
	}
	c.req = nil
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// spliceLine returns b with the n bytes at i replaced by line.
func spliceLine(b []byte, i, n int, line string) []byte {
	out := make([]byte, 0, len(b)-n+len(line))
	out = append(out, b[:i]...)
	out = append(out, line...)
	return append(out, b[i+n:]...)
}

// Read hands gorilla the server's bytes: the answer's head with the
// extension line it accepts, then every frame as it came except the
// frames of a compressed message, which reach it as one plain frame once
// the message has ended.
func (c *inflateConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		switch {
		case c.bad != nil:
			return 0, c.bad
		case len(c.pend) > 0:
			n := copy(p, c.pend)
			c.pend = c.pend[n:]
			return n, nil
		case len(c.body) > 0:
			n := copy(p, c.body)
			c.body = c.body[n:]
			return n, nil
		case len(c.stash) > 0:
			if c.mode != readFrames {
				n := copy(p, c.stash)
				c.stash = c.stash[n:]
				return n, nil
			}
			n, used, err := c.filter(p, c.stash, false)
			c.stash = c.stash[used:]
			if err != nil {
				c.fail(err)
				return n, err
			}
			if n > 0 {
				return n, nil
			}
			continue
		case c.err != nil:
			err := c.err
			c.err = nil
			return 0, err
		}
		switch c.mode {
		case readPass:
			return c.Conn.Read(p)
		case readAnswer:
			n, err := c.Conn.Read(p)
			c.head = append(c.head, p[:n]...)
			c.err = err
			c.answer()
			continue
		}
		n, err := c.Conn.Read(p)
		c.err = err
		k, used, ferr := c.filter(p, p[:n], true)
		if used < n {
			c.spare = append(c.spare[:0], p[used:n]...)
			c.stash = c.spare
		}
		if ferr != nil {
			c.fail(ferr)
			return k, ferr
		}
		if k > 0 {
			return k, nil
		}
	}
}

// fail makes err every later Read's answer.
func (c *inflateConn) fail(err error) {
	c.bad = err
	c.pend, c.body, c.stash, c.msg = nil, nil, nil, nil
}

// answer rewrites the answer's head once it is complete.
func (c *inflateConn) answer() {
	end := bytes.Index(c.head, headEnd)
	if end < 0 {
		if len(c.head) < maxHead && c.err == nil {
			return
		}
		// Too long, or the connection failed: gorilla reads what came.
		c.pend, c.head, c.mode = c.head, nil, readPass
		return
	}
	head, ok := takeoverAnswer(c.head[:end+4])
	c.pend, c.stash, c.head = head, c.head[end+4:], nil
	c.mode = readPass
	if ok {
		c.mode = readFrames
	}
}

// takeoverAnswer returns head, the server's answer up to its blank line,
// with its extension line replaced by the one gorilla accepts, and true,
// when the server switched protocols and granted permessage-deflate with
// server context takeover in a form this client inflates. Otherwise it
// returns head unchanged and false.
func takeoverAnswer(head []byte) ([]byte, bool) {
	status, _, _ := bytes.Cut(head, []byte("\r\n"))
	if s := string(status); s != "HTTP/1.1 101" && !strings.HasPrefix(s, "HTTP/1.1 101 ") {
		return head, false
	}
	at, n := -1, 0
	for i := bytes.Index(head, []byte("\r\n")) + 2; i < len(head)-2; {
		j := bytes.Index(head[i:], []byte("\r\n"))
		if j < 0 {
			return head, false
		}
		name, value, _ := strings.Cut(string(head[i:i+j]), ":")
		if strings.EqualFold(strings.TrimSpace(name), "Sec-WebSocket-Extensions") {
			if at >= 0 || !takeoverGranted(value) {
				return head, false
			}
			at, n = i, j+2
		}
		i += j + 2
	}
	if at < 0 {
		return head, false
	}
	return spliceLine(head, at, n, gorillaOffer), true
}

// takeoverGranted reports whether an answer's extensions are
// permessage-deflate alone, without server_no_context_takeover, and with
// only the parameters a server may answer this client's offer with (RFC
// 7692 §7.1). A server_max_window_bits below 15 is fine: it only keeps the
// server's references nearer than the 32 KiB the Inflater keeps.
func takeoverGranted(value string) bool {
	params := strings.Split(value, ";")
	if strings.TrimSpace(params[0]) != "permessage-deflate" {
		return false
	}
	seen := map[string]bool{}
	for _, p := range params[1:] {
		name, val, hasVal := strings.Cut(strings.TrimSpace(p), "=")
		name = strings.TrimSpace(name)
		if seen[name] {
			return false
		}
		seen[name] = true
		switch name {
		case "client_no_context_takeover":
			if hasVal {
				return false
			}
		case "server_max_window_bits":
			if !validWindowBits(strings.Trim(strings.TrimSpace(val), `"`)) {
				return false
			}
		default:
			// server_no_context_takeover, client_max_window_bits (not
			// offered), a second extension after a comma, or one the RFC
			// does not define.
			return false
		}
	}
	return true
}

// validWindowBits reports whether v is a window size RFC 7692 allows (8 to 15).
func validWindowBits(v string) bool {
	switch v {
	case "8", "9", "10", "11", "12", "13", "14", "15":
		return true
	}
	return false
}

// filter hands dst the bytes of src gorilla reads as they came (every
// frame but a compressed message's) and collects a compressed message's
// frames into msg. It returns how many bytes it put in dst and how many of
// src it used, and stops early when dst is full or a compressed message
// has ended, its inflated frame now in pend and body. inPlace says dst and
// src are the same buffer, so a byte that does not move needs no copy.
func (c *inflateConn) filter(dst, src []byte, inPlace bool) (n, used int, err error) {
	for used < len(src) && n < len(dst) {
		if c.hn < c.hlen {
			b := src[used]
			if c.hn == 0 {
				if err := c.frameStart(b); err != nil {
					return n, used, err
				}
			}
			c.hdr[c.hn] = b
			c.hn++
			used++
			if !c.inMsg {
				dst[n] = b
				n++
			}
			if c.hn == 2 {
				c.hlen = frameHeaderLen(c.hdr[1])
			}
			if c.hn < c.hlen {
				continue
			}
			if err := c.headerEnd(); err != nil {
				return n, used, err
			}
		} else {
			m := int(min(c.left, int64(len(src)-used)))
			if c.inMsg {
				c.msg = append(c.msg, src[used:used+m]...)
			} else {
				m = min(m, len(dst)-n)
				if !inPlace || n != used {
					copy(dst[n:], src[used:used+m])
				}
				n += m
			}
			used += m
			c.left -= int64(m)
		}
		if c.left == 0 {
			done, err := c.frameEnd()
			if err != nil || done {
				return n, used, err
			}
		}
	}
	return n, used, nil
}

// frameHeaderLen is the length of a frame's header from its second byte.
func frameHeaderLen(b1 byte) int {
	n := 2
	if b1&0x80 != 0 {
		n += 4
	}
	switch b1 & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	return n
}

// frameStart decides from a frame's first byte whether it belongs to a
// compressed message. What gorilla refuses itself (reserved bits on a
// control frame, an unknown opcode, a continuation with no message open)
// reaches it as it came.
func (c *inflateConn) frameStart(b byte) error {
	op := b & 0x0f
	c.inMsg = false
	switch op {
	case 0x0:
		if c.open {
			if b&0x70 != 0 {
				return &ProtocolError{Msg: "a compressed message's continuation frame has reserved bits set"}
			}
			c.inMsg = true
		}
	case 0x1, 0x2:
		if c.open {
			return &ProtocolError{Msg: "a message began before the compressed message before it ended"}
		}
		if b&rsv1Bit != 0 {
			if b&0x30 != 0 {
				return &ProtocolError{Msg: "a compressed frame has RSV2 or RSV3 set"}
			}
			c.inMsg, c.open, c.op, c.msg = true, true, op, c.msg[:0]
		}
	}
	return nil
}

// headerEnd reads the payload length of the header just completed.
func (c *inflateConn) headerEnd() error {
	h := c.hdr[:c.hlen]
	var n uint64
	switch l := h[1] & 0x7f; l {
	case 126:
		n = uint64(binary.BigEndian.Uint16(h[2:4]))
	case 127:
		n = binary.BigEndian.Uint64(h[2:10])
	default:
		n = uint64(l)
	}
	if n > 1<<62 {
		return &ProtocolError{Msg: fmt.Sprintf("a frame's length %d is out of range", n)}
	}
	c.left = int64(n)
	if !c.inMsg {
		return nil
	}
	if h[1]&0x80 != 0 {
		return &ProtocolError{Msg: "the server masked a compressed frame; a server's frames are never masked"}
	}
	// A compressed message is at most a little longer than what it
	// inflates to (deflate's stored blocks): one much longer than the
	// limit cannot fit it, and is refused before it is collected.
	if int64(len(c.msg))+c.left > int64(c.limit)+int64(c.limit/64)+1024 {
		return c.tooBig()
	}
	return nil
}

func (c *inflateConn) tooBig() error {
	return fmt.Errorf("a compressed message from the server inflates to more than %d bytes, this client's read limit (DialOptions.ReadLimit): %w", c.limit, ErrInflatedTooBig)
}

// frameEnd ends the frame whose payload was read to its end, and reports
// whether a compressed message ended with it, inflated into pend and body.
func (c *inflateConn) frameEnd() (bool, error) {
	fin := c.hdr[0]&finBit != 0
	inMsg := c.inMsg
	c.hn, c.hlen, c.inMsg = 0, 2, false
	if !inMsg || !fin {
		return false, nil
	}
	c.open = false
	out, err := c.inf.Inflate(c.msg, c.limit)
	if errors.Is(err, ErrInflatedTooBig) {
		return false, c.tooBig()
	}
	if err != nil {
		if cause := errors.Unwrap(err); cause != nil {
			err = cause
		}
		return false, &ProtocolError{Msg: "inflate a compressed message from the server: " + err.Error()}
	}
	if cap(c.msg) > 256<<10 {
		c.msg = nil // a rare large message's buffer is not kept
	}
	c.pend = appendHeader(c.out[:0], c.op, len(out))
	c.body = out
	return true, nil
}

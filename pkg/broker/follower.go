package broker

import (
	"bufio"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
)

// peerFollower follows the frames a peer sends, header by header, as the
// bytes arrive, without keeping any payload. gorilla/websocket reads the
// frames; this sees the same bytes first, for what gorilla's API hides: a
// close frame whose payload is one byte (RFC 6455 §5.5.1: a close body
// starts with a 2-byte code) reaches the close handler exactly like one
// with no payload, which the protocol allows. It is used by the one
// goroutine that reads the connection; its cost is a few operations per
// frame, never per payload byte.
type peerFollower struct {
	hdr    [14]byte // the header being read: at most 2 + 8 (length) + 4 (mask)
	n      int      // bytes of hdr held
	left   uint64   // payload bytes of the current frame still to come
	frames int64    // complete headers read
	closes int      // close frames read
	// firstClose is the payload size of the first close frame: the one
	// gorilla hands to the close handler (it reads nothing after it). A
	// later one, read ahead into gorilla's buffer, is never answered.
	firstClose uint64
}

// BadClose reports whether the peer's first close frame had a 1-byte
// payload: a protocol error, which gorilla reports as a close with no code.
func (f *peerFollower) BadClose() bool { return f.closes > 0 && f.firstClose == 1 }

const opClose = 0x8

// headerSize is the size of the frame header that starts with h, or 0 while
// fewer than its first two bytes are known.
func headerSize(h []byte) int {
	if len(h) < 2 {
		return 0
	}
	n := 2
	switch h[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if h[1]&0x80 != 0 {
		n += 4 // the masking key
	}
	return n
}

// payloadSize reads the payload length of the complete header h.
func payloadSize(h []byte) uint64 {
	switch l := h[1] & 0x7f; l {
	case 126:
		return uint64(binary.BigEndian.Uint16(h[2:4]))
	case 127:
		return binary.BigEndian.Uint64(h[2:10])
	default:
		return uint64(l)
	}
}

// See follows p, the next bytes read from the peer.
func (f *peerFollower) See(p []byte) {
	for len(p) > 0 {
		if f.left > 0 {
			k := min(uint64(len(p)), f.left)
			p = p[k:]
			f.left -= k
			continue
		}
		f.hdr[f.n] = p[0]
		f.n++
		p = p[1:]
		if need := headerSize(f.hdr[:f.n]); need == 0 || f.n < need {
			continue
		}
		size := payloadSize(f.hdr[:f.n])
		if f.hdr[0]&0x0f == opClose {
			if f.closes == 0 {
				f.firstClose = size
			}
			f.closes++
		}
		f.frames++
		f.n, f.left = 0, size
	}
}

// peerConn is the net.Conn gorilla reads through: every byte it reads is
// shown to Frames first. Writes never go through it (the server writes to
// the raw connection, whose writev this wrapper would hide).
type peerConn struct {
	net.Conn
	// Frames follows what was read; only the goroutine that reads the
	// connection touches it.
	Frames peerFollower
	// deflateLine, when set, replaces gorilla's permessage-deflate line
	// in the 101 answer, the first thing written (deflate.go); deflated
	// reports that it did.
	deflateLine string
	deflated    bool
}

// Write writes p; the handshake's answer is the only write gorilla makes
// through it.
func (c *peerConn) Write(p []byte) (int, error) {
	if c.deflateLine == "" {
		return c.Conn.Write(p)
	}
	q, ok := rewriteDeflateLine(p, c.deflateLine)
	c.deflateLine, c.deflated = "", ok
	if _, err := c.Conn.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Read reads from the connection and shows what it read to Frames.
func (c *peerConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.Frames.See(p[:n])
	return n, err
}

// peerHijack is the http.ResponseWriter to hand gorilla's Upgrade: it hijacks
// the connection of the ResponseWriter it wraps and gives gorilla a peerConn
// over it, keeping both. After the upgrade, Raw is the raw connection (for
// writes) and Scan the peerConn gorilla reads through.
type peerHijack struct {
	http.ResponseWriter
	Raw  net.Conn
	Scan *peerConn
	// DeflateLine is the permessage-deflate line the answer carries in
	// place of gorilla's; "" when none was negotiated.
	DeflateLine string
}

// Hijack implements http.Hijacker.
func (h *peerHijack) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := h.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the response writer cannot be hijacked for a WebSocket upgrade (a middleware hides http.Hijacker)")
	}
	nc, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.Raw, h.Scan = nc, &peerConn{Conn: nc, deflateLine: h.DeflateLine}
	return h.Scan, brw, nil
}

package testkit

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"net"
	"net/http"
	"net/http/httptest"
	"time"
)

// OpClose is the opcode of a close frame.
const OpClose = 0x8

// ClientFrame is one complete, masked client frame with the given opcode
// and payload, as a peer puts it on the wire; a test writes it to the raw
// connection to send what gorilla's client API would refuse to.
func ClientFrame(op byte, payload []byte) []byte {
	b := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n < 1<<16:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	mask := []byte{0x12, 0x34, 0x56, 0x78}
	b = append(b, mask...)
	for i, c := range payload {
		b = append(b, c^mask[i%4])
	}
	return b
}

// PeerSeeds are byte strings a peer might send after the upgrade, for the
// seed corpus of a fuzz target of a server's reading path: data and
// control frames, close frames with 0, 1, 2 and more payload bytes, a
// second close after a first, a fragment cut short and a ping that claims
// more bytes than it carries.
func PeerSeeds() [][]byte {
	return [][]byte{
		ClientFrame(0x1, []byte(`{"a":1}`)),
		ClientFrame(0x9, []byte("ping")),
		ClientFrame(0xA, nil),
		ClientFrame(OpClose, nil),
		ClientFrame(OpClose, []byte{3}),
		ClientFrame(OpClose, []byte{3, 0xe8, 'b', 'y', 'e'}),
		ClientFrame(OpClose, []byte{0x0b, 0xb8}), // 3000
		append(ClientFrame(0x9, bytes.Repeat([]byte("p"), 125)), ClientFrame(OpClose, []byte{3})...),
		append(ClientFrame(OpClose, []byte{3, 0xe8}), ClientFrame(OpClose, []byte{1})...),
		{0x01, 0x85, 0, 0, 0, 0, 'h', 'e'}, // a fragment, cut short
		{0x89, 0xFE, 0xFF, 0xFF},           // a ping claiming 65535 bytes
	}
}

// MemPeer is a peer whose side of an upgraded connection is a fixed byte
// string, for fuzzing a server's reading path without a socket: W hijacks
// to a net.Conn that reads those bytes and drops every write, and Request
// is a valid upgrade request for it. Reset sets the bytes of the next
// upgrade; one MemPeer serves one upgrade at a time.
type MemPeer struct {
	W       http.ResponseWriter
	Request *http.Request
	conn    *memConn
}

// NewMemPeer returns a MemPeer that has sent nothing yet.
func NewMemPeer() *MemPeer {
	req := httptest.NewRequest(http.MethodGet, "/t", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-Websocket-Version", "13")
	req.Header.Set("Sec-Websocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	conn := &memConn{in: bytes.NewReader(nil)}
	w := &memHijacker{ResponseRecorder: httptest.NewRecorder(), conn: conn, brw: bufio.NewReadWriter(bufio.NewReader(nil), bufio.NewWriter(nil))}
	return &MemPeer{W: w, Request: req, conn: conn}
}

// Reset makes in what the peer sends on the next upgrade.
func (p *MemPeer) Reset(in []byte) { p.conn.in.Reset(in) }

// Conn is the connection W hijacks to.
func (p *MemPeer) Conn() net.Conn { return p.conn }

// memConn is a net.Conn whose peer sent in and reads nothing: writes are
// dropped.
type memConn struct{ in *bytes.Reader }

func (c *memConn) Read(p []byte) (int, error)       { return c.in.Read(p) }
func (c *memConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *memConn) Close() error                     { return nil }
func (c *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (c *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2} }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

// memHijacker is a ResponseWriter that hijacks to conn. Its buffers are
// reused from one upgrade to the next: gorilla reads nothing through them
// and only borrows the writer's buffer.
type memHijacker struct {
	*httptest.ResponseRecorder
	conn net.Conn
	brw  *bufio.ReadWriter
}

func (h *memHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h.brw.Reader.Reset(h.conn)
	h.brw.Writer.Reset(h.conn)
	return h.conn, h.brw, nil
}

package broker

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/broker/peerframe"
)

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

// FuzzReadLoop feeds arbitrary bytes, as a peer's side of an upgraded
// connection, to the server's reading path: gorilla's frame reader behind
// a peerframe.Conn, with the server's ping, pong and close handlers and a
// subscriber's read loop. It must never panic or hang; every goroutine of
// the connection ends; and the answer to the peer's close is 1002 exactly
// when its first close frame carried one byte. (The frame follower alone is
// fuzzed by peerframe's FuzzPeerFrames.)
func FuzzReadLoop(f *testing.F) {
	seeds := [][]byte{
		clientFrame(0x1, []byte(`{"a":1}`)),
		clientFrame(0x9, []byte("ping")),
		clientFrame(0xA, nil),
		clientFrame(opClose, nil),
		clientFrame(opClose, []byte{3}),
		clientFrame(opClose, []byte{3, 0xe8, 'b', 'y', 'e'}),
		clientFrame(opClose, []byte{0x0b, 0xb8}), // 3000
		append(clientFrame(0x9, bytes.Repeat([]byte("p"), 125)), clientFrame(opClose, []byte{3})...),
		append(clientFrame(opClose, []byte{3, 0xe8}), clientFrame(opClose, []byte{1})...),
		{0x01, 0x85, 0, 0, 0, 0, 'h', 'e'}, // a fragment, cut short
		{0x89, 0xFE, 0xFF, 0xFF},           // a ping claiming 65535 bytes
	}
	for _, s := range seeds {
		f.Add(s)
	}
	up := websocket.Upgrader{ReadBufferSize: 512, CheckOrigin: func(*http.Request) bool { return true }}
	srv := &Server{logger: log.New(io.Discard)}
	req := httptest.NewRequest(http.MethodGet, "/t", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-Websocket-Version", "13")
	req.Header.Set("Sec-Websocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	mem := &memConn{in: bytes.NewReader(nil)}
	w := &memHijacker{ResponseRecorder: httptest.NewRecorder(), conn: mem, brw: bufio.NewReadWriter(bufio.NewReader(nil), bufio.NewWriter(nil))}
	f.Fuzz(func(t *testing.T, in []byte) {
		mem.in.Reset(in)
		hj := &peerframe.Hijack{ResponseWriter: w}
		ws, err := up.Upgrade(hj, req, nil)
		if err != nil {
			t.Fatalf("upgrade: %v", err)
		}
		c := newConn(srv, ws, hj.Raw, &hj.Scan.Frames, nil)
		c.readLoop()
		c.mu.Lock()
		code, closing, peerClosed, flooded := c.closeCode, c.closing, c.peerClosed, c.flooded
		c.mu.Unlock()
		c.finish()
		// A peer that closes with 1002 has its code echoed; only the
		// server's own 1002 says protocol_error.
		ours := code == websocket.CloseProtocolError && bytes.Contains(closing, []byte("protocol_error"))
		bad := hj.Scan.Frames.BadClose()
		if ours && !bad {
			t.Fatalf("answered protocol_error though the first close frame was not 1 byte (%+v)", hj.Scan.Frames)
		}
		if peerClosed && bad && !flooded && !ours {
			t.Fatalf("the peer's 1-byte close was answered %d %q, want 1002 protocol_error", code, closing)
		}
	})
}

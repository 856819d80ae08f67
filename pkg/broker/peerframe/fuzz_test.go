package peerframe

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gorilla/websocket"
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

// FuzzPeerFrames feeds arbitrary bytes, as a peer's side of an upgraded
// connection, to the follower and to gorilla's frame reader behind a Conn.
// Neither may panic or hang; the follower ends in the same state however
// the bytes are cut into reads; and it agrees with gorilla about the
// peer's first close frame: gorilla reports "no status" (1005) for it
// exactly when its payload was 0 or 1 bytes, and BadClose tells those two
// apart. (The server's answer, 1002, is fuzzed by broker's FuzzReadLoop.)
func FuzzPeerFrames(f *testing.F) {
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
		f.Add(s, uint8(1))
	}
	up := websocket.Upgrader{ReadBufferSize: 512, CheckOrigin: func(*http.Request) bool { return true }}
	req := httptest.NewRequest(http.MethodGet, "/t", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-Websocket-Version", "13")
	req.Header.Set("Sec-Websocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	mem := &memConn{in: bytes.NewReader(nil)}
	w := &memHijacker{ResponseRecorder: httptest.NewRecorder(), conn: mem, brw: bufio.NewReadWriter(bufio.NewReader(nil), bufio.NewWriter(nil))}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		// The follower alone, in chunks of chunk bytes and in one piece.
		var whole, cut Follower
		whole.See(in)
		for p, k := in, max(int(chunk), 1); len(p) > 0; {
			n := min(k, len(p))
			cut.See(p[:n])
			p = p[n:]
		}
		if whole != cut {
			t.Fatalf("in chunks of %d the follower ends %+v, in one piece %+v", chunk, cut, whole)
		}

		// gorilla's reader behind a Conn.
		mem.in.Reset(in)
		hj := &Hijack{ResponseWriter: w}
		ws, err := up.Upgrade(hj, req, nil)
		if err != nil {
			t.Fatalf("upgrade: %v", err)
		}
		if hj.Raw != mem || hj.Scan == nil || hj.Scan.Conn != mem {
			t.Fatalf("the upgrade kept raw %v and scan %v; want both over the hijacked connection", hj.Raw, hj.Scan)
		}
		closed, code := false, 0
		ws.SetCloseHandler(func(c int, _ string) error {
			closed, code = true, c
			return nil
		})
		for {
			_, r, err := ws.NextReader()
			if err != nil {
				break
			}
			if _, err := io.Copy(io.Discard, r); err != nil {
				break
			}
		}
		fr := hj.Scan.Frames
		if !closed {
			return
		}
		if fr.closes == 0 {
			t.Fatalf("gorilla read a close frame (code %d) the follower did not see (%+v)", code, fr)
		}
		noStatus := code == websocket.CloseNoStatusReceived
		if noStatus != (fr.firstClose <= 1) {
			t.Fatalf("gorilla reported close code %d for a first close payload of %d bytes; the follower disagrees", code, fr.firstClose)
		}
		if fr.BadClose() != (fr.firstClose == 1) {
			t.Fatalf("BadClose %v for a first close payload of %d bytes", fr.BadClose(), fr.firstClose)
		}
	})
}

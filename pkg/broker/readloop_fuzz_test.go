package broker

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/charmbracelet/log"
	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit"
)

// FuzzReadLoop feeds arbitrary bytes, as a peer's side of an upgraded
// connection, to the server's reading path: gorilla's frame reader behind
// a peerConn, with the server's ping, pong and close handlers and a
// subscriber's read loop. It must never panic or hang; every goroutine of
// the connection ends; and the answer to the peer's close is 1002 exactly
// when its first close frame carried one byte. (The frame follower alone is
// fuzzed by FuzzPeerFrames.)
func FuzzReadLoop(f *testing.F) {
	for _, s := range testkit.PeerSeeds() {
		f.Add(s)
	}
	up := websocket.Upgrader{ReadBufferSize: 512, CheckOrigin: func(*http.Request) bool { return true }}
	srv := &Server{logger: log.New(io.Discard)}
	peer := testkit.NewMemPeer()
	f.Fuzz(func(t *testing.T, in []byte) {
		peer.Reset(in)
		hj := &peerHijack{ResponseWriter: peer.W}
		ws, err := up.Upgrade(hj, peer.Request, nil)
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

package broker

import (
	"io"
	"net/http"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/streamcast/streamcast/internal/testkit"
)

// FuzzPeerFrames feeds arbitrary bytes, as a peer's side of an upgraded
// connection, to the follower and to gorilla's frame reader behind a peerConn.
// Neither may panic or hang; the follower ends in the same state however
// the bytes are cut into reads; and it agrees with gorilla about the
// peer's first close frame: gorilla reports "no status" (1005) for it
// exactly when its payload was 0 or 1 bytes, and BadClose tells those two
// apart. (The server's answer, 1002, is fuzzed by broker's FuzzReadLoop.)
func FuzzPeerFrames(f *testing.F) {
	for _, s := range testkit.PeerSeeds() {
		f.Add(s, uint8(1))
	}
	up := websocket.Upgrader{ReadBufferSize: 512, CheckOrigin: func(*http.Request) bool { return true }}
	peer := testkit.NewMemPeer()
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		// The follower alone, in chunks of chunk bytes and in one piece.
		var whole, cut peerFollower
		whole.See(in)
		for p, k := in, max(int(chunk), 1); len(p) > 0; {
			n := min(k, len(p))
			cut.See(p[:n])
			p = p[n:]
		}
		if whole != cut {
			t.Fatalf("in chunks of %d the follower ends %+v, in one piece %+v", chunk, cut, whole)
		}

		// gorilla's reader behind a peerConn.
		peer.Reset(in)
		hj := &peerHijack{ResponseWriter: peer.W}
		ws, err := up.Upgrade(hj, peer.Request, nil)
		if err != nil {
			t.Fatalf("upgrade: %v", err)
		}
		if hj.Raw != peer.Conn() || hj.Scan == nil || hj.Scan.Conn != peer.Conn() {
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

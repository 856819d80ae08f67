package broker

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// clientFrame is one masked client frame with the given opcode and payload.
func clientFrame(op byte, payload []byte) []byte {
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

// TestACloseFrameWithAOneBytePayloadIsAProtocolError: a close body is empty
// or a 2-byte code and a reason (RFC 6455 §5.5.1), so one byte is answered
// 1002, on a subscriber and on a publisher; an empty close is still 1000.
func TestACloseFrameWithAOneBytePayloadIsAProtocolError(t *testing.T) {
	srv := startServer(t, testConfig(t))
	for _, tc := range []struct {
		path    string
		payload []byte
		want    int
	}{
		{"/trades", []byte{0x03}, websocket.CloseProtocolError},
		{"/trades?publish", []byte{0x03}, websocket.CloseProtocolError},
		{"/trades", nil, websocket.CloseNormalClosure},
		{"/trades?publish", []byte{0x03, 0xe8}, websocket.CloseNormalClosure},
	} {
		ws, _ := mustDial(t, wsURL(srv, tc.path))
		if _, err := ws.NetConn().Write(clientFrame(opClose, tc.payload)); err != nil {
			t.Fatal(err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		var err error
		for err == nil {
			_, _, err = ws.ReadMessage()
		}
		if code, reason := closeOf(err); code != tc.want {
			t.Errorf("%s: a close frame with payload %x was answered %d %q (%v), want %d", tc.path, tc.payload, code, reason, err, tc.want)
		}
		ws.Close()
	}
}

// TestPeerFramesFollowsFramesInAnyChunking: the frame follower finds every
// header, and the 1-byte close, however the bytes are cut into reads.
func TestPeerFramesFollowsFramesInAnyChunking(t *testing.T) {
	var stream []byte
	stream = append(stream, clientFrame(0x1, bytes.Repeat([]byte("a"), 125))...)
	stream = append(stream, clientFrame(0x9, []byte("ping"))...)
	stream = append(stream, clientFrame(0x2, bytes.Repeat([]byte("b"), 300))...)
	stream = append(stream, clientFrame(0x1, bytes.Repeat([]byte("c"), 70000))...)
	stream = append(stream, clientFrame(opClose, []byte{1})...)
	for _, chunk := range []int{1, 2, 3, 7, 13, 64, 4096, len(stream)} {
		var f peerFrames
		for p := stream; len(p) > 0; {
			k := min(chunk, len(p))
			f.see(p[:k])
			p = p[k:]
		}
		if f.frames != 5 || !f.badClose() || f.n != 0 || f.left != 0 {
			t.Errorf("in chunks of %d: frames %d, badClose %v, n %d, left %d; want 5 frames, the bad close, and nothing pending", chunk, f.frames, f.badClose(), f.n, f.left)
		}
	}
	// Only the first close frame is the peer's close; one read ahead of
	// it is never answered.
	var f peerFrames
	f.see(clientFrame(opClose, []byte{0x03, 0xe8}))
	f.see(clientFrame(opClose, []byte{1}))
	if f.badClose() {
		t.Error("a 1-byte close after a well-formed one counted")
	}
}

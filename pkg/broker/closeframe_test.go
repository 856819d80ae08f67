package broker

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// opClose is the opcode of a close frame.
const opClose = 0x8

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

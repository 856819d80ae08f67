package broker

import (
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/streamcast/streamcast/internal/testkit"
)

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
		if _, err := ws.NetConn().Write(testkit.ClientFrame(testkit.OpClose, tc.payload)); err != nil {
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

// A scripted WebSocket peer for the protocol-edge tests of the Go client
// and the shell tools: a test states exactly what the "server" sends,
// which the real broker would never do on purpose. rawpeer.go plays a
// client at the byte level (ClientFrame, MemPeer), for tests of a server's
// reading path, and count.go counts a client's socket writes
// (CountingDialer), for tests of how it batches its frames. End-to-end
// tests run the real broker (brokertest).

package testkit

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// FakeServer runs script on each accepted connection until the test ends
// and returns the ws:// base URL. Cleanup closes every connection and waits
// for every script to return.
func FakeServer(t *testing.T, script func(t *testing.T, c *websocket.Conn, r *http.Request)) string {
	t.Helper()
	var wg sync.WaitGroup
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		wg.Add(1)
		defer wg.Done()
		defer c.Close()
		script(t, c, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		wg.Wait()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// SendText writes s as a text frame; a failed write is logged, since the client
// under test may rightly have gone.
func SendText(t *testing.T, c *websocket.Conn, s string) {
	if err := c.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		t.Logf("fake server write: %v", err)
	}
}

// CloseWithCode sends a close frame and waits (up to 2 s) for the client's
// echo, so the close is delivered before the socket ends.
func CloseWithCode(c *websocket.Conn, code int, reason string) {
	_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	for {
		if _, _, err := c.NextReader(); err != nil {
			return
		}
	}
}

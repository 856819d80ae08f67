//go:build unix

package broker

import (
	"context"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/gorilla/websocket"
	"github.com/streamcast/streamcast/internal/testkit"
)

// TestAPingFloodFromAPeerThatNeverReadsIsClosed: a peer that sends pings and
// never reads the pongs (its receive buffer is tiny) blocks the server's
// writer. Each ping only replaces the one pending pong, and once the peer
// has sent maxAbsorbedControl of them unanswered it is closed (1008) and
// the server logs it once: a pong queued per ping would grow without bound
// (gigabytes in seconds), each counting as proof of life.
func TestAPingFloodFromAPeerThatNeverReadsIsClosed(t *testing.T) {
	for _, path := range []string{"/trades", "/trades?publish"} {
		t.Run(path, func(t *testing.T) {
			logs := &testkit.SyncBuffer{}
			srv := startServer(t, testConfig(t), Options{Logger: log.New(logs)})
			d := websocket.Dialer{
				HandshakeTimeout: 5 * time.Second,
				NetDialContext: (&net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
					var serr error
					err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
					if err != nil {
						return err
					}
					return serr
				}}).DialContext,
			}
			ws, _, err := d.Dial(wsURL(srv, path), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			payload := []byte(strings.Repeat("p", 125))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			sent := 0
			// Never read. Send pings until the server hangs up (the write
			// fails) or far more than any bounded queue would hold.
			for ; sent < 2_000_000 && ctx.Err() == nil; sent++ {
				if err := ws.WriteControl(websocket.PingMessage, payload, time.Now().Add(10*time.Second)); err != nil {
					break
				}
			}
			if sent == 2_000_000 || ctx.Err() != nil {
				t.Fatalf("the server took %d pings from a peer that reads nothing and never closed it", sent)
			}
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(logs.String(), "control frames without reading") {
				if time.Now().After(deadline) {
					t.Fatalf("the flood was not logged; log:\n%s", logs)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if n := strings.Count(logs.String(), "control frames without reading"); n != 1 {
				t.Errorf("the flood was logged %d times, want once", n)
			}
			t.Logf("closed after %d pings", sent)
		})
	}
}

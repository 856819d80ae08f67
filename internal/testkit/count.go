package testkit

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// CountingDialer dials TCP and adds one to writes for every write its
// connections make to their socket, the handshake's included: a test of
// how a client batches its frames counts the system calls it costs.
func CountingDialer(writes *atomic.Int64) *websocket.Dialer {
	return &websocket.Dialer{
		HandshakeTimeout: 5 * time.Second,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{c, writes}, nil
		},
	}
}

// countingConn counts the writes that reach the socket.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

package wire

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// maxHeld is how many bytes of frames a coalescing publisher holds before
// it writes them without waiting for a flush: a socket write of 64 KiB
// already amortises the syscall.
const maxHeld = 64 << 10

// heldConn is a coalescing publisher's connection under the WebSocket (and
// under TLS, for wss). While the publisher writes its own frames it holds
// them in buf; every other write (gorilla's pong and close frames, from
// the reader goroutine) sends what is held first, so bytes keep their
// order. A write that comes in while a frame is being held is held too,
// and goes out with the next flush, at most flushAfter later.
type heldConn struct {
	net.Conn
	flushAfter time.Duration

	mu    sync.Mutex
	hold  bool // the publisher is writing a frame: keep it
	buf   []byte
	err   error       // the first failed write; every later write returns it
	timer *time.Timer // flushes what is held flushAfter after it was first held
}

// Write implements net.Conn.
func (c *heldConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.hold && len(c.buf)+len(b) <= maxHeld {
		if len(c.buf) == 0 {
			c.armLocked()
		}
		c.buf = append(c.buf, b...)
		return len(b), nil
	}
	if len(c.buf) > 0 {
		c.buf = append(c.buf, b...)
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	n, err := c.Conn.Write(b)
	if err != nil {
		c.err = err
	}
	return n, err
}

// armLocked starts the timer that writes held bytes nobody flushed.
func (c *heldConn) armLocked() {
	if c.timer == nil {
		c.timer = time.AfterFunc(c.flushAfter, func() {
			if c.Flush() != nil {
				// The reader then fails the frames' acks.
				_ = c.Conn.Close()
			}
		})
		return
	}
	c.timer.Reset(c.flushAfter)
}

// Flush writes what is held.
func (c *heldConn) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushLocked()
}

func (c *heldConn) flushLocked() error {
	if c.err != nil {
		return c.err
	}
	if len(c.buf) == 0 {
		return nil
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	_, err := c.Conn.Write(c.buf)
	if cap(c.buf) > 2*maxHeld {
		c.buf = nil
	} else {
		c.buf = c.buf[:0]
	}
	if err != nil {
		c.err = err
	}
	return err
}

// setHold starts or ends the publisher's own frame write.
func (c *heldConn) setHold(on bool) {
	c.mu.Lock()
	c.hold = on
	c.mu.Unlock()
}

// Close stops the timer and closes the connection; what is held is lost,
// as unsent bytes are when a socket closes.
func (c *heldConn) Close() error {
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// dialContextOf returns the function d dials TCP with, as gorilla picks
// it: NetDialContext, else NetDial, else a net.Dialer.
func dialContextOf(d *websocket.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.NetDialContext != nil {
		return d.NetDialContext
	}
	if f := d.NetDial; f != nil {
		return func(_ context.Context, network, addr string) (net.Conn, error) { return f(network, addr) }
	}
	var std net.Dialer
	return std.DialContext
}

// holdingDialer returns d with its dials wrapped in a heldConn, and a
// function returning the last connection it made.
func holdingDialer(d *websocket.Dialer, flushAfter time.Duration) (*websocket.Dialer, func() *heldConn) {
	nd := *d
	dial := dialContextOf(d)
	var mu sync.Mutex
	var last *heldConn
	nd.NetDial = nil
	nd.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		hc := &heldConn{Conn: c, flushAfter: flushAfter}
		mu.Lock()
		last = hc
		mu.Unlock()
		return hc, nil
	}
	return &nd, func() *heldConn {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

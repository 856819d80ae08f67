package loadgen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/waitfor"
	"github.com/streamcast/streamcast/pkg/wire"
)

// IdleConfig describes an idle-subscriber measurement (`streamcast bench
// --idle`). Start from DefaultIdleConfig: Validate refuses a value out of
// range rather than replacing it.
type IdleConfig struct {
	URL         string        // the stream, ws:// or wss://host:port/name; a quiet one
	Subscribers int           // idle connections to hold, 1 or more
	Settle      time.Duration // how long to wait before reading the server's RSS
	Dial        wire.DialOptions
}

// DefaultIdleConfig returns the defaults of `streamcast bench --idle`; URL
// and Subscribers are left for the caller.
func DefaultIdleConfig() IdleConfig {
	return IdleConfig{Settle: 3 * time.Second}
}

// Validate checks the configuration, naming the flag of `streamcast bench`
// that sets a bad value. It never changes c.
func (c *IdleConfig) Validate() error {
	switch {
	case c.URL == "":
		return errors.New("bench needs the stream's URL, e.g. ws://127.0.0.1:8765/demo")
	case c.Subscribers < 1:
		return fmt.Errorf("--idle is %d; give 1 or more", c.Subscribers)
	case c.Settle < 0:
		return fmt.Errorf("--idle-settle is %v; give 0 or a positive duration", c.Settle)
	}
	return nil
}

// IdleResult is what Idle measured: the server's resident memory before
// and after holding N idle subscribers.
type IdleResult struct {
	URL              string  `json:"url"`
	Subscribers      int     `json:"idle_subscribers"`
	RSSBeforeBytes   int64   `json:"rss_before_bytes"`
	RSSAfterBytes    int64   `json:"rss_after_bytes"`
	BytesPerSub      float64 `json:"bytes_per_subscriber"`
	GoroutinesBefore int     `json:"goroutines_before"`
	GoroutinesAfter  int     `json:"goroutines_after"`
}

// Idle opens cfg.Subscribers live subscribers that never receive a row,
// waits cfg.Settle for the server to reach a steady state, and reports how
// much the server's RSS grew per subscriber (from /stats process.rss_bytes).
// Every connection is closed before it returns. Run it against a freshly
// started server (the Go runtime keeps memory it has once used, so a second
// run on the same process measures nothing) and a quiet stream: rows
// published meanwhile would fill the subscribers' queues.
func Idle(ctx context.Context, cfg IdleConfig) (IdleResult, error) {
	res := IdleResult{URL: cfg.URL, Subscribers: cfg.Subscribers}
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	statsURL := statsURLOf(cfg.URL)
	before, err := serverMemory(ctx, statsURL, cfg.Dial)
	if err != nil {
		return res, err
	}
	conns := make([]*websocket.Conn, 0, cfg.Subscribers)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	// A raw connection, not wire.Subscribe: the point is the server's cost
	// per subscriber, so the client keeps its own buffers as small as it can.
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 256, WriteBufferSize: 256, TLSClientConfig: cfg.Dial.TLS}
	n := cfg.Subscribers
	for i := 0; i < n; i++ {
		c, _, err := d.DialContext(ctx, cfg.URL, cfg.Dial.Headers())
		if err != nil {
			return res, fmt.Errorf("idle subscriber %d of %d: %w (raise the open-file limit with ulimit -n if this is EMFILE)", i+1, n, err)
		}
		conns = append(conns, c)
		if _, _, err := c.ReadMessage(); err != nil { // the greeting
			return res, fmt.Errorf("idle subscriber %d of %d: read greeting: %w", i+1, n, err)
		}
	}
	if !waitfor.Sleep(ctx, cfg.Settle) {
		return res, ctx.Err()
	}
	after, err := serverMemory(ctx, statsURL, cfg.Dial)
	if err != nil {
		return res, err
	}
	res.RSSBeforeBytes, res.RSSAfterBytes = before.RSSBytes, after.RSSBytes
	res.GoroutinesBefore, res.GoroutinesAfter = before.Goroutines, after.Goroutines
	res.BytesPerSub = float64(after.RSSBytes-before.RSSBytes) / float64(n)
	return res, nil
}

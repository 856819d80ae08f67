package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
)

// IdleResult is what BenchIdle measured: the server's resident memory before
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

// BenchIdle opens n live subscribers to url that never receive a row, waits
// settle for the server to reach a steady state, and reports how much the
// server's RSS grew per subscriber (from /stats process.rss_bytes). Every
// connection is closed before it returns. Run it against a freshly started
// server (the Go runtime keeps memory it has once used, so a second run on the
// same process measures nothing) and a quiet stream: rows
// published meanwhile would fill the subscribers' queues.
func BenchIdle(ctx context.Context, url string, n int, settle time.Duration, dial DialOptions) (IdleResult, error) {
	res := IdleResult{URL: url, Subscribers: n}
	if n < 1 {
		return res, fmt.Errorf("idle subscribers is %d; give 1 or more", n)
	}
	statsURL := statsURLOf(url)
	before, err := processStats(ctx, statsURL, dial.Header)
	if err != nil {
		return res, err
	}
	conns := make([]*websocket.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 256, WriteBufferSize: 256}
	for i := 0; i < n; i++ {
		c, _, err := d.DialContext(ctx, url, dial.Header)
		if err != nil {
			return res, fmt.Errorf("idle subscriber %d of %d: %w (raise the open-file limit with ulimit -n if this is EMFILE)", i+1, n, err)
		}
		conns = append(conns, c)
		if _, _, err := c.ReadMessage(); err != nil { // the greeting
			return res, fmt.Errorf("idle subscriber %d of %d: read greeting: %w", i+1, n, err)
		}
	}
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(settle):
	}
	after, err := processStats(ctx, statsURL, dial.Header)
	if err != nil {
		return res, err
	}
	res.RSSBeforeBytes, res.RSSAfterBytes = before.RSSBytes, after.RSSBytes
	res.GoroutinesBefore, res.GoroutinesAfter = before.Goroutines, after.Goroutines
	res.BytesPerSub = float64(after.RSSBytes-before.RSSBytes) / float64(n)
	return res, nil
}

type serverProcess struct {
	RSSBytes   int64 `json:"rss_bytes"`
	Goroutines int   `json:"goroutines"`
}

// processStats reads the process section of the server's /stats.
func processStats(ctx context.Context, statsURL string, h http.Header) (serverProcess, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, statsURL, nil)
	if err != nil {
		return serverProcess{}, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return serverProcess{}, fmt.Errorf("read %s: %w", statsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return serverProcess{}, fmt.Errorf("read %s: %s", statsURL, resp.Status)
	}
	var st struct {
		Process *serverProcess `json:"process"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return serverProcess{}, fmt.Errorf("read %s: %w", statsURL, err)
	}
	if st.Process == nil || st.Process.RSSBytes == 0 {
		return serverProcess{}, errors.New("the server's /stats reports no process.rss_bytes, so its memory cannot be measured")
	}
	return *st.Process, nil
}

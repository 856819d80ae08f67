package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/streamcast/streamcast/pkg/broker"
	"github.com/streamcast/streamcast/pkg/wire"
)

// statsURLOf maps ws://host/stream to http://host/stats.
func statsURLOf(stream string) string {
	u, err := url.Parse(stream)
	if err != nil {
		return ""
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	}
	u.Path, u.RawPath, u.RawQuery, u.Fragment = "/stats", "", "", ""
	u.User = nil // credentials go in a header, and the URL appears in errors
	return u.String()
}

// readStats fetches the server's /stats document, decoded with the server's
// own type so the two cannot drift apart. dial's headers go with the
// request, and its TLS configuration verifies an https server.
func readStats(ctx context.Context, statsURL string, dial wire.DialOptions) (broker.Stats, error) {
	var st broker.Stats
	if statsURL == "" {
		return st, fmt.Errorf("the stream's URL does not name a server whose /stats can be read")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, statsURL, nil)
	if err != nil {
		return st, fmt.Errorf("read %s: %w", statsURL, err)
	}
	for k, v := range dial.Headers() {
		req.Header[k] = v
	}
	client := http.DefaultClient
	if dial.TLS != nil {
		tr := &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: dial.TLS}
		defer tr.CloseIdleConnections()
		client = &http.Client{Transport: tr}
	}
	resp, err := client.Do(req)
	if err != nil {
		return st, fmt.Errorf("read %s: %w", statsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("read %s: %s", statsURL, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("read %s: %w", statsURL, err)
	}
	return st, nil
}

// serverCPU reads process.cpu_seconds from /stats; ok is false when /stats
// cannot be read, and the report then shows the server's CPU as unknown.
func serverCPU(ctx context.Context, statsURL string, dial wire.DialOptions) (float64, bool) {
	st, err := readStats(ctx, statsURL, dial)
	if err != nil || st.Process.PID == 0 { // no process figures: the user lacks stats on "*"
		return 0, false
	}
	return st.Process.CPUSeconds, true
}

// serverMemory reads the process section of /stats, refusing a server that
// reports no resident set size (there is nothing to measure then).
func serverMemory(ctx context.Context, statsURL string, dial wire.DialOptions) (broker.ProcessStats, error) {
	st, err := readStats(ctx, statsURL, dial)
	if err != nil {
		return broker.ProcessStats{}, err
	}
	if st.Process.PID == 0 {
		return broker.ProcessStats{}, errors.New(`the server's /stats shows no process figures to this user: they need a grant of stats on "*" in its auth: section`)
	}
	if st.Process.RSSBytes == 0 {
		return broker.ProcessStats{}, errors.New("the server's /stats reports no process.rss_bytes, so its memory cannot be measured")
	}
	return st.Process, nil
}

package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"

	"github.com/streamcast/streamcast/pkg/broker"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// This file is the harness of the console's browser tests: a headless
// Debian Chromium driven over the DevTools protocol (chromedp), a broker
// in the test's process, and a publisher keeping it under load.

// chromiumPath finds the browser, or skips the test; with
// STREAMCAST_REQUIRE_CHROMIUM=1 (CI) a missing browser fails it instead.
func chromiumPath(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "chromium is not installed, so the console's browser tests cannot run; install Debian's chromium package (apt-get install chromium)"
	if os.Getenv("STREAMCAST_REQUIRE_CHROMIUM") == "1" {
		t.Fatal(msg + " (STREAMCAST_REQUIRE_CHROMIUM=1)")
	}
	t.Skip(msg)
	return ""
}

// jsErrors collects what the page reports as an error: uncaught
// exceptions, console.error calls, and the browser's own error entries
// (a script that fails to load, a refused content-security rule).
type jsErrors struct {
	mu   sync.Mutex
	errs []string
}

func (j *jsErrors) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.errs = append(j.errs, s)
}

// List returns the errors seen so far, leaving out those matching any of
// allow (expected ones, such as a refused connection while a server restarts).
func (j *jsErrors) List(allow ...string) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
next:
	for _, e := range j.errs {
		for _, a := range allow {
			if strings.Contains(e, a) {
				continue next
			}
		}
		out = append(out, e)
	}
	return out
}

// startBrowser starts a headless Chromium with a fresh profile for the
// test and returns a context driving one tab, and the tab's errors. The
// background-networking flags keep Chromium from dialling Google's hosts,
// which a closed network refuses.
func startBrowser(t testing.TB) (context.Context, *jsErrors) {
	t.Helper()
	path := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser process to exit
	})
	errs := &jsErrors{}
	// Subscribe before the first navigation so no message is lost; the
	// reader ends with the tab's context.
	messages := chromedp.Console(ctx)
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("start chromium (%s): %v", path, err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				errs.add(m.String() + " " + m.URL)
			}
		}
	}()
	t.Cleanup(func() {
		cancelTab()
		<-read
	})
	return ctx, errs
}

// serveTrades runs a broker serving a durable "trades" stream (the demo
// schema) and a live-only "live" one, with no maintenance children, on
// listen ("127.0.0.1:0" for any port) and root.
func tradesConfig(listen, root string) config.Config {
	cfg := config.Default()
	cfg.Listen = listen
	cfg.Root = root
	cfg.Maintain.Enabled = false
	trades := config.DefaultStream("trades")
	trades.Schema = config.RawJSON(config.DemoSchema)
	live := config.DefaultStream("live")
	live.Durable = false
	live.Schema = config.RawJSON(config.DemoSchema)
	cfg.Streams = []config.Stream{trades, live}
	return cfg
}

// trade is the i-th row the load publishes (i from 0): side alternates, so
// offset i+1 has side i%2 on a stream that only this load writes.
func trade(i int64) []byte {
	return fmt.Appendf(nil, `{"event_ts":%d,"symbol":"%s","price":%d.5,"amount":0.015,"side":%d}`,
		1790038800000000+i, []string{"BTC-USD", "ETH-USD", "SOL-USD"}[i%3], 85000+i%1000, i%2)
}

// load publishes to ws base/stream at about perSecond rows a second until
// the returned stop is called; stop returns how many rows were
// acknowledged, which is every row it sent (it waits for the replies
// owed). Rows are numbered from first. The frames (of up to 10 rows) are
// pipelined, up to the publisher's window, and paced by the time elapsed
// rather than by a tick each: one round trip per tick could not keep up
// with 20k rows/s on a busy box.
func load(t testing.TB, base, stream string, perSecond int, first int64) (stop func() int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pub, err := wire.Publish(ctx, base+"/"+stream, wire.PublishOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	per := max(1, min(10, perSecond/100))
	type sent struct {
		ack  *wire.Ack
		rows int
	}
	acks := make(chan sent, 4096)
	var acked int64
	ackErr := make(chan error, 1)
	go func() {
		var first error
		for a := range acks {
			if _, err := a.ack.Wait(context.Background()); err != nil {
				if first == nil {
					first = err
				}
				continue
			}
			acked += int64(a.rows)
		}
		ackErr <- first
	}()
	sendErr := make(chan error, 1)
	go func() {
		defer close(acks)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		began := time.Now()
		var n int64
		for {
			select {
			case <-ctx.Done():
				sendErr <- nil
				return
			case <-tick.C:
			}
			owed := int64(time.Since(began).Seconds()*float64(perSecond)) - n
			for owed > 0 {
				k := min(int64(per), owed)
				rows := make([][]byte, k)
				for i := range rows {
					rows[i] = trade(first + n + int64(i))
				}
				a, err := pub.SubmitBatch(ctx, rows)
				if err != nil {
					if ctx.Err() != nil {
						err = nil
					}
					sendErr <- err
					return
				}
				acks <- sent{a, int(k)}
				n += k
				owed -= k
			}
		}
	}()
	var once sync.Once
	stop = func() int64 {
		once.Do(func() {
			cancel()
			if err := <-sendErr; err != nil {
				t.Errorf("load: %v", err)
			}
			if err := <-ackErr; err != nil {
				t.Errorf("load: %v", err)
			}
			_ = pub.Close()
		})
		return acked
	}
	t.Cleanup(func() { stop() })
	return stop
}

// statsOf reads the broker's /stats.
func statsOf(t testing.TB, httpBase string) broker.Stats {
	t.Helper()
	res, err := http.Get(httpBase + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var st broker.Stats
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func endOffset(t testing.TB, httpBase, stream string) int64 {
	t.Helper()
	for _, s := range statsOf(t, httpBase).Streams {
		if s.Name == stream && s.EndOffset != nil {
			return *s.EndOffset
		}
	}
	t.Fatalf("/stats has no end offset for %q", stream)
	return 0
}

// waitJS evaluates expr every 20 ms until it returns true, failing the
// test after limit with what it last saw of describe (a JS expression).
func waitJS(t testing.TB, ctx context.Context, limit time.Duration, what, expr, describe string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			seen, _ := chromedp.Run(ctx, chromedp.Evaluate[any](describe))
			t.Fatalf("%s: not seen after %s; the page shows %v", what, limit, seen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freeAddr is a loopback address free right now, for a broker that must
// come back on the same address after a restart.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// screenshot writes the page as PNG to name in the test's artifact
// directory (kept with go test -artifacts -outputdir DIR), and to
// $STREAMCAST_CONSOLE_SCREENSHOT_DIR when that is set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dirs := []string{t.ArtifactDir()}
	if d := os.Getenv("STREAMCAST_CONSOLE_SCREENSHOT_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
}

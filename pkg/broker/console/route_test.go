package console_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// TestConsoleIsServedAtRootAndTheModuleToAnyOrigin checks the plain
// routes: the page at / and /ui, its assets, and /streamcast.js as a
// JavaScript module any origin may import.
func TestConsoleIsServedAtRootAndTheModuleToAnyOrigin(t *testing.T) {
	base := brokertest.Start(t, tradesConfig("127.0.0.1:0", t.TempDir()))
	h := "http://" + strings.TrimPrefix(base, "ws://")
	for _, p := range []string{"/", "/ui"} {
		code, hdr, body := get(t, h+p)
		if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") || !strings.Contains(body, `src="console.js"`) {
			t.Fatalf("GET %s: %d %s; want the console page", p, code, hdr.Get("Content-Type"))
		}
	}
	code, hdr, body := get(t, h+"/streamcast.js")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/javascript") || hdr.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(body, "export class Subscription") {
		t.Fatalf("GET /streamcast.js: %d %q CORS %q", code, hdr.Get("Content-Type"), hdr.Get("Access-Control-Allow-Origin"))
	}
	if code, _, _ := get(t, h+"/console.css"); code != 200 {
		t.Fatalf("GET /console.css: %d", code)
	}
	if code, _, _ := get(t, h+"/index.html"); code != 404 {
		t.Fatalf("GET /index.html: %d; the page has one address, /", code)
	}
}

// TestConsoleMovesToUIWhenAStreamHasTheEmptyName serves a live stream
// named "" (its URL is /): the console is then at /ui only, / answers
// plain GETs with where to find it, and WebSocket upgrades on / still
// reach the stream.
func TestConsoleMovesToUIWhenAStreamHasTheEmptyName(t *testing.T) {
	cfg := tradesConfig("127.0.0.1:0", t.TempDir())
	root := config.DefaultStream("")
	root.Durable = false
	cfg.Streams = append(cfg.Streams, root)
	base := brokertest.Start(t, cfg)
	h := "http://" + strings.TrimPrefix(base, "ws://")
	if code, _, body := get(t, h+"/ui"); code != 200 || !strings.Contains(body, `src="console.js"`) {
		t.Fatalf("GET /ui: %d; want the console page", code)
	}
	if code, _, body := get(t, h+"/"); code != 404 || !strings.Contains(body, "web console at /ui") {
		t.Fatalf("GET /: %d %q; want 404 naming /ui", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub, err := wire.Subscribe(ctx, base+"/", wire.SubscribeOptions{})
	if err != nil {
		t.Fatalf("subscribe to the stream at /: %v", err)
	}
	defer sub.Close()
	if g := sub.Greeting(); g.Stream != "" {
		t.Fatalf("the upgrade on / greeted as stream %q; want the stream named \"\"", g.Stream)
	}
}

package broker

import (
	"encoding/json"
	stdlog "log"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/wire"
)

// dialOrigin opens a WebSocket with the given Origin header ("" sends none)
// and returns the HTTP status of a refused upgrade (0 when it upgraded).
func dialOrigin(t *testing.T, srv *Server, origin string) int {
	t.Helper()
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	ws, resp, err := d.Dial(wsURL(srv, "/trades"), h)
	if err == nil {
		ws.Close()
		return 0
	}
	if resp == nil {
		t.Fatalf("dial with origin %q: %v", origin, err)
	}
	return resp.StatusCode
}

func TestAllowedOriginsAreCheckedAtTheUpgrade(t *testing.T) {
	cases := []struct {
		name    string
		allowed []string
		origin  string
		status  int
	}{
		{"none configured allows any origin", nil, "https://elsewhere.example", 0},
		{"a listed origin passes", []string{"https://app.example.com"}, "https://app.example.com", 0},
		{"origins compare without case", []string{"https://app.example.com"}, "https://APP.example.com", 0},
		{"an unlisted origin is refused", []string{"https://app.example.com"}, "https://elsewhere.example", http.StatusForbidden},
		{"a listed origin on another port is refused", []string{"https://app.example.com"}, "https://app.example.com:8443", http.StatusForbidden},
		{"a request without an origin is no browser's and passes", []string{"https://app.example.com"}, "", 0},
		{"* alone allows any origin", []string{"*"}, "https://elsewhere.example", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.AllowedOrigins = c.allowed
			srv := startServer(t, cfg)
			if got := dialOrigin(t, srv, c.origin); got != c.status {
				t.Fatalf("origin %q with allowed_origins %q: status %d, want %d (0: upgraded)", c.origin, c.allowed, got, c.status)
			}
		})
	}
}

func TestAllowedOriginsAreValidated(t *testing.T) {
	for _, c := range []struct {
		origins []string
		err     string
	}{
		{[]string{"https://app.example.com", "http://localhost:3000"}, ""},
		{[]string{"*"}, ""},
		{[]string{"app.example.com"}, "is not an origin"},
		{[]string{"ftp://app.example.com"}, "is not an origin"},
		{[]string{"https://app.example.com/"}, "ends with /"},
		{[]string{"https://app.example.com/app"}, "no path"},
		{[]string{"https://user@app.example.com"}, "no path, query or user"},
		{[]string{"*", "https://app.example.com"}, "give * alone"},
	} {
		cfg := testConfig(t)
		cfg.AllowedOrigins = c.origins
		err := cfg.Validate()
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%q: %v", c.origins, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "allowed_origins[")):
			t.Errorf("%q: got %v, want an error naming the entry and saying %q", c.origins, err, c.err)
		}
	}
}

func TestMiddlewareRunsInOrderBeforeTheRoutes(t *testing.T) {
	var mu sync.Mutex
	var order []string
	ran := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(order, ",")
	}
	mw := func(name string) Middleware {
		return func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				if r.Header.Get("X-Refuse") != "" {
					http.Error(w, "refused by "+name, http.StatusUnauthorized)
					return
				}
				next.ServeHTTP(w, r)
			})
		}
	}
	srv := startServer(t, testConfig(t), Options{Middleware: []Middleware{mw("first"), mw("second")}})
	resp, err := http.Get("http://" + srv.Addr().String() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || ran() != "first,second" {
		t.Fatalf("status %d, middleware ran %v", resp.StatusCode, ran())
	}
	// A middleware refusing a WebSocket answers before the upgrade.
	mu.Lock()
	order = nil
	mu.Unlock()
	h := http.Header{"X-Refuse": {"1"}}
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	_, r2, err := d.Dial(wsURL(srv, "/trades"), h)
	if err == nil || r2 == nil || r2.StatusCode != http.StatusUnauthorized || ran() != "first" {
		t.Fatalf("refused upgrade: %v, %v, middleware ran %v", err, r2, ran())
	}
}

func TestShutdownClosesWith1001AndACompactJSONReason(t *testing.T) {
	srv := startServer(t, testConfig(t))
	sub, _ := mustDial(t, wsURL(srv, "/trades"))
	p := dialPublisher(t, srv, "trades")
	if r := p.roundTrip(trade(1)); r.Error != "" {
		t.Fatal(r)
	}
	if _, err := readFrame(t, sub); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	want := wire.GoingAwayReason(wire.WhyServerStopping)
	for name, ws := range map[string]*websocket.Conn{"subscriber": sub, "publisher": p.ws} {
		_, _, err := ws.ReadMessage()
		code, reason := closeOf(err)
		if code != wire.CloseGoingAway || reason != want {
			t.Errorf("%s: %v, want 1001 with reason %s", name, err, want)
		}
		if !json.Valid([]byte(reason)) {
			t.Errorf("%s: the 1001 reason %q is not JSON", name, reason)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// TestAcceptErrorsAreLoggedOncePerInterval writes net/http's accept error
// line, as its Serve loop does while the descriptor limit is reached, a
// hundred times: the server logs it once, at ERROR, and sends net/http's
// other lines to the debug level.
func TestAcceptErrorsAreLoggedOncePerInterval(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	srv := startServer(t, testConfig(t), Options{Logger: log.New(logs)})
	w := stdlog.New(httpErrorLog{srv}, "", 0)
	for range 100 {
		w.Printf("http: Accept error: accept tcp 127.0.0.1:8765: accept4: too many open files; retrying in 5ms")
	}
	w.Printf("http: TLS handshake error from 127.0.0.1:5555: EOF")
	if n := strings.Count(logs.String(), "accepting a connection failed"); n != 1 {
		t.Errorf("100 accept errors gave %d lines, want 1:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "too many open files") {
		t.Errorf("the line does not say why accepting failed:\n%s", logs)
	}
	if strings.Contains(logs.String(), "TLS handshake") {
		t.Errorf("a broken-off handshake was logged above debug:\n%s", logs)
	}
}

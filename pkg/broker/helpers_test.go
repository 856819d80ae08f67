package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/broker/supervise"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// childEnv, when set, makes the test binary run a server instead of the tests
// (the crash test re-executes itself): its value is a JSON Config, and the
// address is written to childAddrEnv's file.
const (
	childEnv     = "STREAMCAST_BROKER_TEST_CHILD"
	childAddrEnv = "STREAMCAST_BROKER_TEST_ADDR_FILE"
)

// helperForker starts the tests' helper servers from one locked thread that
// lives as long as the test binary. Pdeathsig fires when the forking thread
// ends, not the process: forked from an ordinary goroutine, versitygw would
// die whenever a Server's own forker, locked to that same thread, exits at
// Close.
var helperForker *supervise.Forker // made and closed by TestMain

func TestMain(m *testing.M) {
	if cfgJSON := os.Getenv(childEnv); cfgJSON != "" {
		os.Exit(runChild(cfgJSON, os.Getenv(childAddrEnv)))
	}
	testkit.RelaxGC() // the tests, not the helper children above
	testkit.RelaxChildrenGC()
	helperForker = supervise.NewForker()
	code := m.Run()
	helperForker.Close()       // its helpers were stopped by their tests' cleanups
	testkit.RemoveStreamcast() // streamcastExe's binary
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on a successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func runChild(cfgJSON, addrFile string) int {
	var cfg config.Config
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	srv, err := New(cfg, Options{OnReady: func(a net.Addr) {
		_ = os.WriteFile(addrFile+".tmp", []byte(a.String()), 0o644)
		_ = os.Rename(addrFile+".tmp", addrFile)
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	if err := srv.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// testConfig is a config serving a durable "trades" stream (DemoSchema) in a
// temporary root on a free port, plus a live-only "live" stream with the
// same schema and an unchecked live-only "raw" stream.
func testConfig(t testing.TB) config.Config {
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Root = t.TempDir()
	trades := config.DefaultStream("trades")
	trades.Schema = config.RawJSON(config.DemoSchema)
	live := config.DefaultStream("live")
	live.Durable = false
	live.Schema = config.RawJSON(config.DemoSchema)
	raw := config.DefaultStream("raw")
	raw.Durable = false
	cfg.Streams = []config.Stream{trades, live, raw}
	cfg.Maintain.Enabled = false // no child processes; the supervision tests turn them on
	return cfg
}

// startServer runs a server for cfg until the test ends and returns it once
// it is ready.
func startServer(t testing.TB, cfg config.Config, opts ...Options) *Server {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	return startServerWith(t, cfg, o, nil)
}

// leakChecked holds the names of the top-level tests whose first server has registered its
// goroutine-leak check.
var leakChecked sync.Map

// startServerWith is startServer with a hook run on the server after New and
// before Run (to set test hooks the committer reads); hook may be nil.
func startServerWith(t testing.TB, cfg config.Config, o Options, hook func(*Server)) *Server {
	t.Helper()
	if tt, ok := t.(*testing.T); ok {
		// Only a top-level test's first server checks for leaks (no test
		// here runs in parallel). Its cleanup runs after every later
		// server's, subtests' included, so by then all of them are closed;
		// a later server's own check would see the goroutines the earlier,
		// still open server started after the later one's snapshot.
		top, _, _ := strings.Cut(tt.Name(), "/")
		if _, checked := leakChecked.LoadOrStore(top, true); !checked {
			// Registered before the server's own cleanup, so it runs after
			// it: once the server is closed, nothing it started may run.
			before := goleak.IgnoreCurrent()
			t.Cleanup(func() {
				leakChecked.Delete(top)
				if !tt.Failed() {
					goleak.VerifyNone(tt, before)
				}
			})
		}
	}
	srv, err := New(cfg, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if hook != nil {
		hook(srv)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(context.Background()) }()
	select {
	case <-srv.Ready():
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("server not ready after 20s")
	}
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return srv
}

func wsURL(srv *Server, path string) string {
	return "ws://" + srv.Addr().String() + path
}

// dial connects a raw gorilla client and reads the first frame: the greeting,
// or the refusal's close error.
func dial(t testing.TB, url string) (*websocket.Conn, *wire.Greeting, error) {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	ws, _, err := d.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { ws.Close() })
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	typ, msg, err := ws.ReadMessage()
	if err != nil {
		return ws, nil, err
	}
	_ = ws.SetReadDeadline(time.Time{})
	if typ != websocket.TextMessage {
		t.Fatalf("greeting is not a text frame")
	}
	g, err := wire.ParseGreeting(msg)
	if err != nil {
		t.Fatalf("greeting %s: %v", msg, err)
	}
	return ws, g, nil
}

// mustDial is dial that fails the test on a refusal.
func mustDial(t testing.TB, url string) (*websocket.Conn, *wire.Greeting) {
	t.Helper()
	ws, g, err := dial(t, url)
	if err != nil {
		t.Fatalf("subscribe %s: refused: %v", url, err)
	}
	return ws, g
}

// closeOf returns the close code and reason of err, or 0.
func closeOf(err error) (int, string) {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code, ce.Text
	}
	return 0, ""
}

// dataFrame is one parsed data frame.
type dataFrame struct {
	Offset int64
	TS     int64
	Row    json.RawMessage
	Raw    []byte
}

// readFrame reads one data frame.
func readFrame(t testing.TB, ws *websocket.Conn) (dataFrame, error) {
	t.Helper()
	typ, msg, err := ws.ReadMessage()
	if err != nil {
		return dataFrame{}, err
	}
	if typ != websocket.TextMessage {
		t.Fatalf("data frame is not text")
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(msg, &parts); err != nil || len(parts) != 3 {
		t.Fatalf("data frame %s is not [offset,ts,row]", msg)
	}
	f := dataFrame{Offset: wire.Null, Row: parts[2], Raw: msg}
	if string(parts[0]) != "null" {
		if err := json.Unmarshal(parts[0], &f.Offset); err != nil {
			t.Fatalf("offset in %s: %v", msg, err)
		}
	}
	if err := json.Unmarshal(parts[1], &f.TS); err != nil {
		t.Fatalf("ts in %s: %v", msg, err)
	}
	return f, nil
}

// trade returns the JSON of a valid trade row numbered i.
func trade(i int) string {
	return fmt.Sprintf(`{"event_ts":%d,"symbol":"S%d","price":%d.5,"amount":1.0,"side":%d}`, 1700000000000000+i, i%7, i, i%2)
}

// batch returns a JSON list of n trades numbered from i.
func batch(i, n int) string {
	parts := make([]string, n)
	for k := range parts {
		parts[k] = trade(i + k)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// pubConn is a raw publisher connection.
type pubConn struct {
	t  testing.TB
	ws *websocket.Conn
	g  *wire.Greeting
	mu sync.Mutex
}

func dialPublisher(t testing.TB, srv *Server, stream string) *pubConn {
	t.Helper()
	ws, g := mustDial(t, wsURL(srv, "/"+stream+"?publish"))
	return &pubConn{t: t, ws: ws, g: g}
}

func (p *pubConn) send(frame string) error {
	return p.ws.WriteMessage(websocket.TextMessage, []byte(frame))
}

func (p *pubConn) reply() (wire.Reply, error) {
	var r wire.Reply
	_, msg, err := p.ws.ReadMessage()
	if err != nil {
		return r, err
	}
	if err := wire.ParseReply(msg, &r); err != nil {
		p.t.Fatalf("reply %s: %v", msg, err)
	}
	return r, nil
}

// roundTrip sends one frame and waits for its reply.
func (p *pubConn) roundTrip(frame string) wire.Reply {
	p.t.Helper()
	if err := p.send(frame); err != nil {
		p.t.Fatalf("send: %v", err)
	}
	r, err := p.reply()
	if err != nil {
		p.t.Fatalf("reply: %v", err)
	}
	return r
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func streamStats(srv *Server, name string) StreamStats {
	for _, s := range srv.Stats().Streams {
		if s.Name == name {
			return s
		}
	}
	return StreamStats{}
}

package control_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"

	"github.com/charmbracelet/log"
	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/broker"
	"github.com/streamcast/streamcast/pkg/broker/control"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// The child mode of the test binary: a real serve in its own process,
// which a crash test kills at a point the environment names.
const (
	childRootEnv = "CONTROL_TEST_CHILD_ROOT" // the child serves this root
	childAddrEnv = "CONTROL_TEST_CHILD_ADDR" // it writes its address here once ready
	killAtEnv    = "CONTROL_TEST_KILL_AT"    // "after-commit": SIGKILL itself between a mutation's commit and its answer; "before-run:KIND": once an operation of KIND is marked running
	childExeEnv  = "CONTROL_TEST_CHILD_EXE"  // when set, the streamcast binary the child's migration worker runs
	childCPUEnv  = "CONTROL_TEST_CHILD_CPU"  // when set, the one CPU the child and its children run on (Linux)
)

func TestMain(m *testing.M) {
	if root := os.Getenv(childRootEnv); root != "" {
		os.Exit(runChild(root, os.Getenv(childAddrEnv), os.Getenv(killAtEnv)))
	}
	testkit.RelaxGC() // the tests, not the helper children above
	testkit.RelaxChildrenGC()
	code := m.Run()
	testkit.RemoveStreamcast() // the binary brokertest.Executable built, if a test asked for it
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on a successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func runChild(root, addrFile, killAt string) int {
	if cpu := os.Getenv(childCPUEnv); cpu != "" {
		if err := pinProcess(cpu); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	opts := broker.Options{OnReady: func(a net.Addr) {
		_ = os.WriteFile(addrFile+".tmp", []byte(a.String()), 0o644)
		_ = os.Rename(addrFile+".tmp", addrFile)
	}, Executable: os.Getenv(childExeEnv), Logger: log.New(os.Stderr)} // the parent keeps it, for its failures
	kill := func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	switch {
	case killAt == "after-commit":
		defer control.SetAfterCommit(kill)()
	case strings.HasPrefix(killAt, "before-run:"):
		kind := strings.TrimPrefix(killAt, "before-run:")
		defer control.SetBeforeRun(func(k string) {
			if k == kind {
				kill()
			}
		})()
	}
	srv, err := broker.New(serveConfig(root), opts)
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

const tradeSchema = `{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":"string"}},"required":["id","sym"]}`

// serveConfig serves root with a control: section over it (profile
// "local"), a static durable stream "neighbour", and no maintenance
// children (the tests run no streamcast binary).
func serveConfig(root string) config.Config {
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Root = root
	cfg.Maintain = config.Maintain{}
	n := config.DefaultStream("neighbour")
	n.Schema = config.RawJSON(tradeSchema)
	cfg.Streams = []config.Stream{n}
	cfg.Control = &config.Control{
		MaxPending: 32,
		MaxBytes:   4096,
		Profiles:   map[string]config.Profile{"local": {Root: filepath.Join(root, "registered")}},
		Protected:  []string{"keep"},
	}
	return cfg
}

// fixture is a running server with a control registry.
type fixture struct {
	root string
	base string // http://addr
	ws   string // ws://addr
	srv  *broker.Server
	stop func()
}

// start makes a registry under a new root and serves it.
func start(t testing.TB) *fixture {
	t.Helper()
	root := t.TempDir()
	cfg := serveConfig(root)
	if _, err := control.Init(context.Background(), cfg.RegistryPath()); err != nil {
		t.Fatal(err)
	}
	return serve(t, root)
}

// startMigrationChildren is start with the streamcast binary given to
// the server, so a migration runs in its child process as it does under
// streamcast serve (migrator.go); no maintenance child runs.
func startMigrationChildren(t testing.TB) *fixture {
	t.Helper()
	exe := brokertest.Executable(t)
	root := t.TempDir()
	cfg := serveConfig(root)
	if _, err := control.Init(context.Background(), cfg.RegistryPath()); err != nil {
		t.Fatal(err)
	}
	return serveOpts(t, cfg, broker.Options{Executable: exe})
}

// serve runs the server over root (its registry made already).
func serve(t testing.TB, root string) *fixture {
	t.Helper()
	return serveWith(t, serveConfig(root))
}

// serveWith runs the server with cfg (its registry made already).
func serveWith(t testing.TB, cfg config.Config) *fixture {
	t.Helper()
	return serveOpts(t, cfg, broker.Options{})
}

// serveOpts runs the server with cfg and opts.
func serveOpts(t testing.TB, cfg config.Config, opts broker.Options) *fixture {
	t.Helper()
	srv, stop := brokertest.Serve(t, cfg, opts)
	return &fixture{root: cfg.Root, srv: srv, stop: stop,
		base: "http://" + srv.Addr().String(), ws: "ws://" + srv.Addr().String()}
}

// req is one raw HTTP request to the API.
type req struct {
	method, path, body string
	hdr                map[string]string
}

// resp is an answer, read whole.
type resp struct {
	status int
	hdr    http.Header
	body   []byte
}

func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer %d is not JSON: %v: %s", r.status, err, r.body)
	}
	return m
}

// errCode is the error body's code, "" when the answer is no error.
func (r resp) errCode() string {
	var e struct {
		Error *control.ErrorBody `json:"error"`
	}
	if json.Unmarshal(r.body, &e) != nil || e.Error == nil {
		return ""
	}
	return e.Error.Code
}

func (f *fixture) do(t testing.TB, q req) resp {
	t.Helper()
	return do(t, f.base, q)
}

func do(t testing.TB, base string, q req) resp {
	t.Helper()
	var body io.Reader
	if q.body != "" {
		body = strings.NewReader(q.body)
	}
	hr, err := http.NewRequest(q.method, base+q.path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range q.hdr {
		hr.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", q.method, q.path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, b}
}

// keyN numbers the idempotency keys mut makes (tests run it concurrently).
var keyN atomic.Int64

// mut is a mutation's headers: JSON, a fresh idempotency key, and the
// precondition given ("*" for If-None-Match: *, else If-Match).
func mut(pre string) map[string]string {
	h := map[string]string{"Content-Type": "application/json", "Idempotency-Key": fmt.Sprintf("k-%d-%d", time.Now().UnixNano(), keyN.Add(1))}
	switch {
	case pre == "*":
		h["If-None-Match"] = "*"
	case pre != "":
		h["If-Match"] = pre
	}
	return h
}

func decl(init string) string {
	return `{"schema":` + tradeSchema + `,"storage_profile":"local","initialization":"` + init + `","exactly_once":true,"max_replay":null}`
}

// create declares name (create_if_absent) and waits for the operation.
func (f *fixture) create(t testing.TB, name string) {
	t.Helper()
	r := f.do(t, req{"PUT", "/control/v1/streams/" + name, decl("create_if_absent"), mut("*")})
	if r.status != http.StatusAccepted {
		t.Fatalf("create %s: %d %s", name, r.status, r.body)
	}
	f.wait(t, r)
}

// etag reads the stream's ETag.
func (f *fixture) etag(t testing.TB, name string) string {
	t.Helper()
	r := f.do(t, req{"GET", "/control/v1/streams/" + name, "", nil})
	if r.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", name, r.status, r.body)
	}
	return r.hdr.Get("ETag")
}

// setDesired sets the desired state and waits for its operation to end.
func (f *fixture) setDesired(t testing.TB, name, state string) map[string]any {
	t.Helper()
	r := f.do(t, req{"PUT", "/control/v1/streams/" + name + "/desired", `{"state":"` + state + `"}`, mut(f.etag(t, name))})
	if r.status != http.StatusAccepted && r.status != http.StatusOK {
		t.Fatalf("desired %s %s: %d %s", name, state, r.status, r.body)
	}
	return f.wait(t, r)
}

// wait polls the operation an answer names until it ends, and fails the
// test when it failed. A no-op (200) has no operation: its answer is the
// succeeded one.
func (f *fixture) wait(t testing.TB, r resp) map[string]any {
	t.Helper()
	if r.status == http.StatusOK {
		return r.json(t)
	}
	loc := r.hdr.Get("Location")
	if loc == "" {
		t.Fatalf("no Location in %d %s", r.status, r.body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		op := f.do(t, req{"GET", loc, "", nil}).json(t)
		switch op["status"] {
		case control.StatusSucceeded:
			return op
		case control.StatusFailed:
			t.Fatalf("operation failed: %v", op)
		}
		if time.Now().After(deadline) {
			t.Fatalf("operation still %v after 30s", op["status"])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// expectOffset publishes row to name on a connection of its own and fails
// the test, saying when (what), unless it is acknowledged at offset want.
func expectOffset(t testing.TB, ws, name, row string, want int, what string) {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial(ws+"/"+name+"?publish", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, _, err := conn.ReadMessage(); err != nil {
		t.Fatalf("%s: no greeting (%v)", what, err)
	}
	_ = conn.WriteMessage(websocket.TextMessage, []byte(row))
	if _, b, err := conn.ReadMessage(); string(b) != fmt.Sprintf(`{"ok":[%d]}`, want) {
		t.Fatalf("%s, the row %s got %s (%v); want offset %d", what, row, b, err, want)
	}
}

// publish sends rows ids [from, to) to name as one batch and returns the
// reply.
func publish(t testing.TB, ws, name string, from, to int) map[string]any {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(ws+"/"+name+"?publish", nil)
	if err != nil {
		t.Fatalf("dial %s: %v", name, err)
	}
	defer c.Close()
	if _, _, err := c.ReadMessage(); err != nil { // greeting
		t.Fatal(err)
	}
	var rows bytes.Buffer
	rows.WriteByte('[')
	for i := from; i < to; i++ {
		if i > from {
			rows.WriteByte(',')
		}
		fmt.Fprintf(&rows, `{"id":%d,"sym":"x"}`, i)
	}
	rows.WriteByte(']')
	if err := c.WriteMessage(websocket.TextMessage, rows.Bytes()); err != nil {
		t.Fatal(err)
	}
	_, b, err := c.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// refusedCode dials name and returns the close code the server refuses
// it with (0 when it greets instead).
func refusedCode(t testing.TB, ws, name string) int {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(ws+"/"+name, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", name, err)
	}
	defer c.Close()
	_, _, err = c.ReadMessage()
	if ce, ok := err.(*websocket.CloseError); ok {
		return ce.Code
	}
	return 0
}

// streamID reads the stream's bound id.
func (f *fixture) streamID(t testing.TB, name string) string {
	t.Helper()
	id, _ := f.do(t, req{"GET", "/control/v1/streams/" + name, "", nil}).json(t)["stream_id"].(string)
	return id
}

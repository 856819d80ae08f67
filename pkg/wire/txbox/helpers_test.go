package txbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/broker"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// pg is the package's PostgreSQL server, started by the first test that
// needs one and stopped by TestMain.
var pg testkit.SharedPostgres

// Child roles: the test binary re-executed as a broker or as an application.
const (
	childRoleEnv = "TXBOX_TEST_CHILD"     // "broker" or "app"
	childArgEnv  = "TXBOX_TEST_CHILD_ARG" // the role's JSON argument
)

func TestMain(m *testing.M) {
	switch os.Getenv(childRoleEnv) {
	case "broker":
		os.Exit(runBrokerChild(os.Getenv(childArgEnv)))
	case "app":
		os.Exit(runAppChild(os.Getenv(childArgEnv)))
	}
	if role := os.Getenv(crashRoleEnv); role != "" {
		os.Exit(crashChild(role)) // the inbox's crash tests (inbox_crash_test.go)
	}
	testkit.RelaxGC() // the tests, not the helper children above
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}

// rowSchema is the test stream's: {"n": integer, "pad": string?}.
const rowSchema = `{"type":"object","properties":{"n":{"type":"integer"},"pad":{"type":["string","null"]}},"required":["n"]}`

// eoConfig serves a durable exactly-once stream "eo" with rowSchema, in a
// temporary root on a free port.
func eoConfig(t testing.TB) config.Config {
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Root = t.TempDir()
	eo := config.DefaultStream("eo")
	eo.Schema = config.RawJSON(rowSchema)
	eo.ExactlyOnce = true
	eo.MaxReplay = nil
	cfg.Streams = []config.Stream{eo}
	cfg.Maintain.Enabled = false
	return cfg
}

// startBroker runs a broker in this process and returns the stream's URL.
func startBroker(t testing.TB) string {
	return brokertest.Start(t, eoConfig(t)) + "/eo"
}

// dialects runs f once per dialect: SQLite in a temporary file, and
// PostgreSQL in a database of its own on the shared server.
func dialects(t *testing.T, f func(t *testing.T, db *sql.DB, d Dialect)) {
	for _, d := range []Dialect{SQLite, Postgres} {
		t.Run(d.String(), func(t *testing.T) {
			db, d := openDB(t, d)
			f(t, db, d)
		})
	}
}

// openDB opens a fresh database of dialect d with the tables made, closed
// at cleanup.
func openDB(t testing.TB, d Dialect) (*sql.DB, Dialect) {
	t.Helper()
	db, d, err := OpenDSN(dsnFor(t, d))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := CreateTables(context.Background(), db, d); err != nil {
		t.Fatal(err)
	}
	return db, d
}

// dsnFor makes a fresh database of dialect d and returns its DSN.
func dsnFor(t testing.TB, d Dialect) string {
	if d == Postgres {
		return pg.Get(t).NewDB(t)
	}
	return "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "app.db"))
}

// sendRows sends rows {"n":from}…{"n":to} in transactions of per rows each.
func sendRows(t testing.TB, db *sql.DB, o *Outbox, from, to, per int) {
	t.Helper()
	ctx := context.Background()
	for n := from; n <= to; n += per {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var rows [][]byte
		for k := n; k < n+per && k <= to; k++ {
			rows = append(rows, []byte(fmt.Sprintf(`{"n":%d}`, k)))
		}
		if _, err := o.SendMany(ctx, tx, rows); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// streamRow is one row read back from the stream.
type streamRow struct {
	Offset int64
	N      int64
}

// readStream reads the stream at url from offset 0 until it has want rows
// (failing after 60 s), then checks nothing more is there.
func readStream(t testing.TB, url string, want int) []streamRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sub, err := wire.Subscribe(ctx, url, wire.SubscribeOptions{FromEarliest: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// Everything committed before the subscribe is replayed: read up to
	// the replay's end, so a row too many shows.
	end := int64(0)
	if r := sub.Greeting().Replay; r != nil {
		end = r.End
	}
	var rows []streamRow
	for len(rows) < want || (len(rows) > 0 && rows[len(rows)-1].Offset+1 < end) {
		m, err := sub.Recv(ctx)
		if err != nil {
			t.Fatalf("read the stream after %d of %d rows: %v", len(rows), want, err)
		}
		var r struct{ N int64 }
		if err := json.Unmarshal(m.Row, &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, streamRow{Offset: m.Offset, N: r.N})
	}
	return rows
}

// logBuffer is a slog handler's destination that tests read.
type logBuffer struct{ testkit.SyncBuffer }

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// waitUntil polls cond (a cheap observation) every few milliseconds until
// it holds, failing after cap.
func waitUntil(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// child is a re-executed test binary.
type child struct {
	cmd    *exec.Cmd
	stderr *logBuffer
	done   chan struct{}
}

// startChild runs this test binary in role with arg; it is killed at
// cleanup, and dies with the test binary.
func startChild(t testing.TB, role string, arg any) *child {
	t.Helper()
	b, err := json.Marshal(arg)
	if err != nil {
		t.Fatal(err)
	}
	c := &child{stderr: &logBuffer{}, done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), childRoleEnv+"="+role, childArgEnv+"="+string(b))
	c.cmd.Stderr = c.stderr
	c.cmd.Stdout = c.stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
	})
	return c
}

func (c *child) kill(t testing.TB) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.done
}

// brokerArg is a broker child's configuration.
type brokerArg struct {
	Config   config.Config
	AddrFile string
}

// startBrokerChild runs a broker in a child process on cfg.Listen and
// returns once it serves, with its address.
func startBrokerChild(t testing.TB, cfg config.Config) (*child, string) {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	c := startChild(t, "broker", brokerArg{Config: cfg, AddrFile: addrFile})
	var addr string
	waitUntil(t, "the broker child to serve", 30*time.Second, func() bool {
		select {
		case <-c.done:
			t.Fatalf("the broker child exited: %s", c.stderr)
		default:
		}
		b, err := os.ReadFile(addrFile)
		addr = string(b)
		return err == nil
	})
	return c, addr
}

func runBrokerChild(arg string) int {
	var a brokerArg
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		fmt.Fprintln(os.Stderr, "broker child:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	srv, err := broker.New(a.Config, broker.Options{OnReady: func(addr net.Addr) {
		_ = os.WriteFile(a.AddrFile+".tmp", []byte(addr.String()), 0o644)
		_ = os.Rename(a.AddrFile+".tmp", a.AddrFile)
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "broker child:", err)
		return 1
	}
	if err := srv.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "broker child:", err)
		return 1
	}
	return 0
}

// freePort is a loopback port free right now, for a broker that must come
// back on the same address after a kill.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// contains reports whether s holds sub, for log checks.
func contains(s, sub string) bool { return strings.Contains(s, sub) }

// brokertestRun is brokertest.Run: the broker's base URL and its stop.
func brokertestRun(t testing.TB, cfg config.Config) (string, func()) {
	t.Helper()
	return brokertest.Run(t, cfg)
}

// runBroker runs a broker on cfg in this process until stop (or the test's
// end), for tests that stop and restart it on the same address and root.
func runBroker(t testing.TB, cfg config.Config) (stop func()) {
	t.Helper()
	_, stop = brokertest.Run(t, cfg)
	return stop
}

// copyDir copies the tree at src into dst (a stopped broker's root).
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, fi.Mode())
	})
	if err != nil {
		t.Fatal(err)
	}
}

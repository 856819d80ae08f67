package txbox

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/broker"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// The helpers of the inbox's tests carry an "inbox" prefix: the outbox's
// tests share this package and bring their own.

// inboxBroker is a real broker serving a durable "trades" stream (the demo
// schema) from a root that survives a restart.
type inboxBroker struct {
	t    testing.TB
	cfg  config.Config
	srv  *broker.Server
	errc chan error
	Base string // ws://127.0.0.1:PORT
}

func startInboxBroker(t testing.TB, root string) *inboxBroker {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Root = root
	cfg.Maintain.Enabled = false
	trades := config.DefaultStream("trades")
	trades.Schema = config.RawJSON(config.DemoSchema)
	cfg.Streams = []config.Stream{trades}
	b := &inboxBroker{t: t, cfg: cfg}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func (b *inboxBroker) start() {
	b.t.Helper()
	srv, err := broker.New(b.cfg, broker.Options{})
	if err != nil {
		b.t.Fatal(err)
	}
	b.srv, b.errc = srv, make(chan error, 1)
	go func() { b.errc <- srv.Run(context.Background()) }()
	select {
	case <-srv.Ready():
	case err := <-b.errc:
		b.t.Fatal(err)
	case <-time.After(20 * time.Second):
		b.t.Fatal("broker not ready after 20s")
	}
	addr := srv.Addr().String()
	b.cfg.Listen = addr // a restart comes back on the same address
	b.Base = "ws://" + addr
}

func (b *inboxBroker) stop() {
	if b.srv == nil {
		return
	}
	_ = b.srv.Close()
	if err := <-b.errc; err != nil {
		b.t.Errorf("broker Run: %v", err)
	}
	b.srv = nil
}

func (b *inboxBroker) restart() { b.stop(); b.start() }

func (b *inboxBroker) url() string { return b.Base + "/trades" }

// subscribers is the broker's count of subscribers to trades.
func (b *inboxBroker) subscribers() int64 {
	for _, s := range b.srv.Stats().Streams {
		if s.Name == "trades" {
			return s.Subscribers
		}
	}
	return -1
}

func inboxTrade(i int) []byte {
	return fmt.Appendf(nil, `{"event_ts":%d,"symbol":"BTC-USD","price":%d.5,"amount":0.015,"side":%d}`, 1790038800000000+i, 85000+i, i%2)
}

// publish sends n trades numbered from first, in batches.
func (b *inboxBroker) publish(first, n int) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := wire.Publish(ctx, b.url(), wire.PublishOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	defer p.Close()
	var rows [][]byte
	for i := first; i < first+n; i++ {
		rows = append(rows, inboxTrade(i))
		if len(rows) == 500 || i == first+n-1 {
			if _, err := p.SendBatch(ctx, rows); err != nil {
				b.t.Fatal(err)
			}
			rows = rows[:0]
		}
	}
}

// inboxDB is one application database of a dialect, fresh for the test.
type inboxDB struct {
	name string
	open func(t testing.TB) (*sql.DB, Dialect, string) // the DB, its dialect and its DSN
}

// inboxDBs are the dialects the inbox's tests run on: a SQLite file, and a
// PostgreSQL server (skipped without the binaries, failed in CI).
func inboxDBs() []inboxDB {
	return []inboxDB{
		{"sqlite", func(t testing.TB) (*sql.DB, Dialect, string) {
			dsn := "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "app.db"))
			return inboxOpen(t, dsn)
		}},
		{"postgres", func(t testing.TB) (*sql.DB, Dialect, string) {
			return inboxOpen(t, pg.Get(t).NewDB(t))
		}},
	}
}

func inboxOpen(t testing.TB, dsn string) (*sql.DB, Dialect, string) {
	t.Helper()
	db, d, err := OpenDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, d, dsn
}

func inboxCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// inboxWait polls cond until it holds, failing after 20 s.
func inboxWait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 20s waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func inboxCount(t testing.TB, db *sql.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

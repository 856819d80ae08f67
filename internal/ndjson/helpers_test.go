package ndjson

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// TestMain fails the package when any test leaves a goroutine behind: Tail
// and Load must end every goroutine they start before they return.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func greeting(end int64, replay *wire.Range) string {
	g := wire.Greeting{Stream: "trades", EndOffset: end, Replay: replay, Durable: true}
	return string(g.AppendJSON(nil))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// tailDefaults fills the fields a test leaves zero from
// DefaultTailOptions, so a test names only what it is about.
func tailDefaults(o TailOptions) TailOptions {
	d := DefaultTailOptions()
	if o.MinBackoff == 0 {
		o.MinBackoff = d.MinBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = max(d.MaxBackoff, o.MinBackoff)
	}
	if o.BatchBytes == 0 {
		o.BatchBytes = d.BatchBytes
	}
	return o
}

// loadDefaults fills the fields a test leaves zero from
// DefaultLoadOptions, so a test names only what it is about.
func loadDefaults(o LoadOptions) LoadOptions {
	d := DefaultLoadOptions()
	if o.BatchSize == 0 {
		o.BatchSize = d.BatchSize
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = d.MaxInFlight
	}
	if o.Coalesce == 0 {
		o.Coalesce = d.Coalesce
	}
	if o.MaxFrameBytes == 0 {
		o.MaxFrameBytes = d.MaxFrameBytes
	}
	if o.PollEvery == 0 {
		o.PollEvery = d.PollEvery
	}
	if o.ProgressEvery == 0 {
		o.ProgressEvery = d.ProgressEvery
	}
	return o
}

// serve runs a broker with a durable "trades" stream (the demo schema) and a
// live-only "live" one until the test ends, and returns its ws:// base URL.
func serve(t *testing.T, tweak func(*config.Config)) string {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Root = t.TempDir()
	cfg.Maintain.Enabled = false // no seal/publish children: the rows stay in the buffer
	trades := config.DefaultStream("trades")
	trades.Schema = config.RawJSON(config.DemoSchema)
	live := config.DefaultStream("live")
	live.Durable = false
	live.Schema = config.RawJSON(config.DemoSchema)
	cfg.Streams = []config.Stream{trades, live}
	if tweak != nil {
		tweak(&cfg)
	}
	return startServer(t, cfg)
}

// startServer runs a broker with cfg until the test ends and returns its
// ws:// base URL.
func startServer(t *testing.T, cfg config.Config) string {
	t.Helper()
	return brokertest.Start(t, cfg)
}

func trade(i int) []byte {
	return fmt.Appendf(nil, `{"event_ts":%d,"symbol":"BTC-USD","price":%d.5,"amount":0.015,"side":%d}`, 1790038800000000+i, 85000+i, i%2)
}

// waitUntil polls cond until it holds, failing the test after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

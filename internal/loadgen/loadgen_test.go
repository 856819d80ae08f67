package loadgen

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// TestMain fails the package when a test leaves a goroutine behind: Run and
// Idle must end every goroutine they start before they return.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve runs a broker with a durable "trades" stream (the demo schema) until
// the test ends, and returns its ws:// base URL.
func serve(t *testing.T) string {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Root = t.TempDir()
	cfg.Maintain.Enabled = false // no seal/publish children: the rows stay in the buffer
	trades := config.DefaultStream("trades")
	trades.Schema = config.RawJSON(config.DemoSchema)
	cfg.Streams = []config.Stream{trades}
	return brokertest.Start(t, cfg)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// runConfig returns DefaultConfig for url, changed by set.
func runConfig(url string, set func(*Config)) Config {
	c := DefaultConfig()
	c.URL = url
	if set != nil {
		set(&c)
	}
	return c
}

func TestRunMeasuresARealServer(t *testing.T) {
	base := serve(t)
	res, err := Run(ctxT(t), runConfig(base+"/trades", func(c *Config) {
		c.Publishers, c.RowsPerFrame, c.Subscribers, c.Duration = 2, 10, 3, 500*time.Millisecond
		// Paced: flat out, two coalescing publishers outrun three
		// subscribers on a 2-core box, and the server rightly drops them
		// (4429), which is not what this test is about.
		c.Rate = 20000
	}))
	if err != nil {
		t.Fatal(err)
	}
	if res.RowsPublished == 0 || res.PublishErrors != 0 || res.FramesDelivered == 0 {
		t.Fatalf("result %+v", res)
	}
	if res.Drops != 0 || res.Gaps != 0 || res.Missing != 0 || res.SubscriberErrors != 0 {
		t.Errorf("lost frames: %+v", res)
	}
	if res.AckLatency.Count == 0 || res.DeliveryLatency.Count == 0 || res.DeliveryLatency.P99 < res.DeliveryLatency.P50 {
		t.Errorf("latencies %+v %+v", res.AckLatency, res.DeliveryLatency)
	}
	if res.ServerCPUSeconds < 0 {
		t.Errorf("the server reports process.cpu_seconds in /stats, but bench did not read it")
	}
}

func TestAPacedRunNeverPublishesAheadOfItsRate(t *testing.T) {
	base := serve(t)
	// 500 rows/s for 1 s in frames of 5 rows: the schedule has 100 frames
	// in the window, due every 10 ms from its start, so at most 500 rows.
	// (How close to 500 a loaded machine gets is a measurement, not a
	// property: the pacer's schedule itself is checked exactly, with a
	// fake clock, in TestThePacerReleasesFramesOnSchedule.)
	res, err := Run(ctxT(t), runConfig(base+"/trades", func(c *Config) {
		c.Publishers, c.RowsPerFrame, c.Rate, c.Subscribers, c.Duration = 1, 5, 500, 1, time.Second
	}))
	if err != nil {
		t.Fatal(err)
	}
	if res.RowsPublished == 0 || res.RowsPublished > 500 || res.RowsPublished%5 != 0 {
		t.Errorf("a run paced at 500 rows/s for 1 s published %d rows; want 5 to 500, in frames of 5", res.RowsPublished)
	}
	if res.Missing != 0 || res.Gaps != 0 || res.Drops != 0 {
		t.Errorf("published %d rows; %d missing, %d gaps, %d drops; want every row delivered", res.RowsPublished, res.Missing, res.Gaps, res.Drops)
	}
}

func TestRunRefusesAStreamWithoutTheTSColumn(t *testing.T) {
	base := serve(t)
	_, err := Run(ctxT(t), runConfig(base+"/trades", func(c *Config) { c.Duration, c.TSColumn = time.Second, "sent_at" }))
	if err == nil || !strings.Contains(err.Error(), "sent_at") || !strings.Contains(err.Error(), "--ts-column") {
		t.Fatalf("got %v", err)
	}
}

func TestConfigRefusesWhatItCannotRunInsteadOfReplacingIt(t *testing.T) {
	tests := []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"no URL", func(c *Config) { c.URL = "" }, "needs the stream's URL"},
		{"nothing to measure", func(c *Config) { c.Publishers, c.Subscribers = 0, 0 }, "nothing to measure"},
		{"negative publishers", func(c *Config) { c.Publishers = -1 }, "--publishers is -1"},
		{"no rows per frame", func(c *Config) { c.RowsPerFrame = 0 }, "--rows-per-frame is 0"},
		{"negative rate", func(c *Config) { c.Rate = -1 }, "--rate is -1"},
		{"no duration", func(c *Config) { c.Duration = 0 }, "--duration is 0s"},
		{"no send-time column", func(c *Config) { c.TSColumn = "" }, "--ts-column is empty"},
		{"no frame in flight", func(c *Config) { c.MaxInFlight = 0 }, "--max-in-flight is 0"},
		{"negative drain", func(c *Config) { c.Drain = -time.Second }, "--drain is -1s"},
		{"negative coalesce", func(c *Config) { c.Coalesce = -time.Millisecond }, "--coalesce is -1ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := runConfig("ws://127.0.0.1:1/nowhere", tt.set)
			before := c
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate: %v, want an error containing %q", err, tt.want)
			}
			if c.RowsPerFrame != before.RowsPerFrame || c.Drain != before.Drain || c.TSColumn != before.TSColumn || c.MaxInFlight != before.MaxInFlight {
				t.Errorf("Validate changed the config: %+v, was %+v", c, before)
			}
			if _, err := Run(ctxT(t), c); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run: %v, want the same refusal before connecting", err)
			}
		})
	}
	ok := runConfig("ws://127.0.0.1:1/nowhere", nil)
	if err := ok.Validate(); err != nil {
		t.Errorf("DefaultConfig with a URL: %v", err)
	}
}

func TestIdleConfigRefusesWhatItCannotRun(t *testing.T) {
	for _, tt := range []struct {
		set  func(*IdleConfig)
		want string
	}{
		{func(c *IdleConfig) { c.Subscribers = 0 }, "--idle is 0"},
		{func(c *IdleConfig) { c.Settle = -time.Second }, "--idle-settle is -1s"},
		{func(c *IdleConfig) { c.URL = "" }, "needs the stream's URL"},
	} {
		c := DefaultIdleConfig()
		c.URL, c.Subscribers = "ws://127.0.0.1:1/nowhere", 10
		tt.set(&c)
		if _, err := Idle(ctxT(t), c); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Idle: %v, want an error containing %q", err, tt.want)
		}
	}
}

func TestIdleMeasuresTheServersMemoryPerSubscriber(t *testing.T) {
	base := serve(t)
	c := DefaultIdleConfig()
	c.URL, c.Subscribers, c.Settle = base+"/trades", 20, 0
	res, err := Idle(ctxT(t), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Subscribers != 20 || res.RSSBeforeBytes <= 0 || res.RSSAfterBytes <= 0 || res.GoroutinesAfter <= res.GoroutinesBefore {
		t.Errorf("result %+v: want both RSS readings, and the server holding more goroutines with 20 subscribers", res)
	}
}

// TestACompressedRunReceivesEveryRow: compressing subscribers (one timing,
// the others counting) receive every row, and the timing one decodes them.
func TestACompressedRunReceivesEveryRow(t *testing.T) {
	base := serve(t)
	res, err := Run(ctxT(t), runConfig(base+"/trades", func(c *Config) {
		c.Publishers, c.RowsPerFrame, c.Subscribers, c.Duration = 1, 10, 3, 500*time.Millisecond
		c.Rate, c.Compress = 5000, true
	}))
	if err != nil {
		t.Fatal(err)
	}
	if res.RowsPublished == 0 || res.FramesDelivered == 0 {
		t.Fatalf("result %+v", res)
	}
	if res.Drops != 0 || res.Gaps != 0 || res.Missing != 0 || res.SubscriberErrors != 0 {
		t.Errorf("lost frames: %+v", res)
	}
	if res.DeliveryLatency.Count == 0 {
		t.Errorf("the timing subscriber timed no row: %+v", res.DeliveryLatency)
	}
}

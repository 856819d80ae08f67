package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamcast/streamcast/internal/rusage"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// Config describes one load run against a running server. Start from
// DefaultConfig: Validate refuses a value out of range rather than
// replacing it.
type Config struct {
	URL          string        // the stream, ws://host:port/name; a durable stream whose schema has TSColumn
	Publishers   int           // publisher connections (0 = none: measure an existing feed)
	RowsPerFrame int           // rows per publish frame; 1 sends single-row frames, more sends batches
	Rate         float64       // total rows/s across publishers; 0 = as fast as the server acks
	Subscribers  int           // subscriber connections, live from the frontier
	Duration     time.Duration // how long publishers send
	TSColumn     string        // int64 column carrying the send time
	TSNanos      bool          // the send time is in ns (default µs)
	MaxInFlight  int           // frames each publisher keeps unanswered
	// Coalesce is wire.PublishOptions.Coalesce for every publisher: a
	// burst of frames shares one socket write, flushed when the window is
	// full or the pacer waits. 0 writes each frame with its own write, as
	// a client that does not coalesce does.
	Coalesce time.Duration
	Drain    time.Duration // after publishing stops, how long subscribers may take to catch up; 0 does not wait
	// IntoExisting lets publishers write into a durable stream that already
	// holds rows. Without it Run refuses such a stream with *HoldsRows:
	// every row bench publishes there stays for good, beside the user's.
	IntoExisting bool
	// Compress makes the subscribers offer permessage-deflate with context
	// takeover, as browsers do (deflate.go); one in 25 inflates and times
	// its rows, the others count frames.
	Compress bool
	// SSE makes the subscribers read Server-Sent Events (GET with Accept:
	// text/event-stream) instead of WebSocket frames, with the same
	// accounting; a drop (the close event of a 4429) resumes at the
	// offset it names, as a WebSocket subscriber does.
	SSE bool
	// HTTPPublish makes the publishers POST each frame as a request on a
	// keep-alive connection (wire.HTTPPublisher), one request in flight
	// per publisher; MaxInFlight and Coalesce do not apply.
	HTTPPublish bool
	Dial        wire.DialOptions
}

// DefaultConfig returns the defaults of `streamcast bench`: one publisher of
// single-row frames as fast as acks come, one subscriber, 10 s. URL is left
// for the caller.
func DefaultConfig() Config {
	return Config{
		Publishers:   1,
		RowsPerFrame: 1,
		Subscribers:  1,
		Duration:     10 * time.Second,
		TSColumn:     "event_ts",
		MaxInFlight:  wire.DefaultMaxInFlight,
		Coalesce:     time.Millisecond,
		Drain:        10 * time.Second,
	}
}

// Validate checks the configuration, naming the flag of `streamcast bench`
// that sets a bad value and what it may be. It never changes c.
func (c *Config) Validate() error {
	switch {
	case c.URL == "":
		return errors.New("bench needs the stream's URL, e.g. ws://127.0.0.1:8765/demo")
	case c.Publishers < 0 || c.Subscribers < 0:
		return fmt.Errorf("--publishers is %d and --subscribers %d; give 0 or more of each", c.Publishers, c.Subscribers)
	case c.Publishers == 0 && c.Subscribers == 0:
		return errors.New("nothing to measure: give --publishers, --subscribers, or both")
	case c.Publishers > 0 && c.RowsPerFrame < 1:
		return fmt.Errorf("--rows-per-frame is %d; give 1 or more", c.RowsPerFrame)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("--rate is %v; give rows/s, or 0 for as fast as possible", c.Rate)
	case c.Duration <= 0:
		return fmt.Errorf("--duration is %v; give a positive duration such as 10s", c.Duration)
	case c.TSColumn == "":
		return errors.New("--ts-column is empty; name an int64 column of the stream, such as event_ts")
	case c.Publishers > 0 && c.MaxInFlight < 1:
		return fmt.Errorf("--max-in-flight is %d; give 1 or more (the server's limits.max_in_flight is a good value)", c.MaxInFlight)
	case c.Coalesce < 0:
		return fmt.Errorf("--coalesce is %v; give 0 (a socket write per frame) or a positive duration such as 1ms", c.Coalesce)
	case c.Drain < 0:
		return fmt.Errorf("--drain is %v; give 0 (do not wait) or a positive duration", c.Drain)
	case c.SSE && c.Compress:
		return errors.New("--sse and --compress together: an event stream is not compressed with permessage-deflate; give one of them")
	}
	return nil
}

// Latency summarizes a latency distribution in milliseconds (1% precision).
type Latency struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Result is what a run measured. Rates are over the publishing window
// (Duration); latencies cover every row acked or frame received.
type Result struct {
	URL          string  `json:"url"`
	Stream       string  `json:"stream"`
	Durable      bool    `json:"durable"`
	Publishers   int     `json:"publishers"`
	RowsPerFrame int     `json:"rows_per_frame"`
	CoalesceMS   float64 `json:"coalesce_ms"` // 0: a socket write per frame
	TargetRate   float64 `json:"target_rate"` // 0 = max
	Subscribers  int     `json:"subscribers"`
	SSE          bool    `json:"sse,omitempty"`          // subscribers read Server-Sent Events
	HTTPPublish  bool    `json:"http_publish,omitempty"` // publishers POST each frame
	DurationS    float64 `json:"duration_s"`

	RowsPublished   int64   `json:"rows_published"`         // rows acknowledged
	FirstOffset     int64   `json:"first_offset,omitempty"` // durable streams: the lowest offset bench's rows took; 0 = none
	LastOffset      int64   `json:"last_offset,omitempty"`  // durable streams: the highest; rows of other publishers may sit between
	PublishRowsPerS float64 `json:"publish_rows_per_s"`     // acknowledged rows / duration
	PublishErrors   int64   `json:"publish_errors"`         // frames answered with an error
	AckLatency      Latency `json:"ack_latency"`            // frame sent → its ack received

	FramesDelivered   int64   `json:"frames_delivered"` // data frames received by all subscribers in the window
	DeliveredPerS     float64 `json:"delivered_frames_per_s"`
	DeliveryLatency   Latency `json:"delivery_latency"` // row sent → frame received (publish→receive), every 4th frame
	Drops             int64   `json:"drops"`            // 4429 closes (each subscriber resumed where told)
	Gaps              int64   `json:"gaps"`             // offsets skipped within a subscription
	Missing           int64   `json:"missing"`          // acknowledged rows some subscriber never received
	SubscriberErrors  int64   `json:"subscriber_errors"`
	ServerCPUSeconds  float64 `json:"server_cpu_seconds"` // from /stats process.cpu_seconds; -1 when the server does not report it
	ServerCPUPercent  float64 `json:"server_cpu_percent"` // of one core over the window; -1 when unknown
	ClientCPUSeconds  float64 `json:"client_cpu_seconds"` // this process (the load generator)
	ClientCPUPercent  float64 `json:"client_cpu_percent"` // of one core over the window
	FirstErrorMessage string  `json:"first_error,omitempty"`
}

// Run runs the load described by cfg: subscribers attach live first, then
// publishers send frames of generated rows (valid for the greeting's schema,
// the send time in cfg.TSColumn) for cfg.Duration; it then waits for the
// acks and for subscribers to catch up, and reports. An invalid cfg is
// refused with Validate's error before anything connects.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	res := Result{URL: cfg.URL, Publishers: cfg.Publishers, RowsPerFrame: cfg.RowsPerFrame, CoalesceMS: float64(cfg.Coalesce) / float64(time.Millisecond), TargetRate: cfg.Rate,
		Subscribers: cfg.Subscribers, SSE: cfg.SSE, HTTPPublish: cfg.HTTPPublish, ServerCPUSeconds: -1, ServerCPUPercent: -1}
	if cfg.HTTPPublish {
		res.CoalesceMS = 0 // a request per frame
	}

	var events *http.Client // every event-stream subscriber's, a connection each
	if cfg.SSE {
		events = newEventsClient(cfg.Dial, cfg.Subscribers)
		defer events.CloseIdleConnections()
	}
	// One probe subscription reads the greeting: schema, durability. With
	// --sse it is an event stream, so a run with --http-publish too needs
	// no WebSocket at all, as behind a proxy that passes no upgrade.
	g, sch, err := probeGreeting(ctx, cfg, events)
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	res.Stream, res.Durable = g.Stream, g.Durable
	gen, err := newRowTemplate(sch, cfg.TSColumn)
	if err != nil {
		return res, fmt.Errorf("bench: stream %q: %w", g.Stream, err)
	}
	key := []byte(strconv.Quote(cfg.TSColumn) + ":")
	unit := int64(time.Microsecond)
	if cfg.TSNanos {
		unit = 1
	}
	// Refuse before anything connects to publish: a durable stream keeps
	// every test row, and one that holds rows is someone's data (a user
	// once found 17,878 of them in an exactly-once, replicated stream).
	if cfg.Publishers > 0 && g.Durable && g.EndOffset > 1 && !cfg.IntoExisting {
		return res, &HoldsRows{Stream: g.Stream, EndOffset: g.EndOffset, Rate: cfg.Rate, Duration: cfg.Duration,
			Sample: string(gen.frame(nil, 1, time.Now().UnixNano()/unit))}
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var firstErr atomic.Pointer[error]
	noteErr := func(err error) {
		firstErr.CompareAndSwap(nil, &err)
	}

	// Subscribers first, so every row published is one they should receive.
	subs := make([]*benchSub, cfg.Subscribers)
	var subWG sync.WaitGroup
	// resub opens a subscription at offset after a drop; nil: a drop ends
	// the subscriber.
	resub := func(ctx context.Context, offset int64) (subscription, error) {
		return wire.Subscribe(ctx, cfg.URL, wire.SubscribeOptions{DialOptions: cfg.Dial, Offset: wire.At(offset)})
	}
	if cfg.SSE {
		resub = func(ctx context.Context, offset int64) (subscription, error) {
			return dialSSESub(ctx, events, cfg.URL, cfg.Dial, offset)
		}
	}
	if cfg.Compress {
		resub = nil
	}
	for i := range subs {
		var s subscription
		var err error
		if cfg.SSE {
			s, err = resub(ctx, wire.Null)
		} else if cfg.Compress {
			var d *deflateSub
			if d, err = dialDeflateSub(ctx, cfg.URL, cfg.Dial, i%compressTimed == 0); err == nil {
				if d.Ext == "" {
					d.Close()
					err = errors.New("the server did not negotiate permessage-deflate (compression: false?)")
				}
				s = d
			}
		} else {
			s, err = wire.Subscribe(ctx, cfg.URL, wire.SubscribeOptions{DialOptions: cfg.Dial})
		}
		if err != nil {
			for _, b := range subs[:i] {
				b.sub.Close()
			}
			return res, fmt.Errorf("bench: subscriber %d: %w", i+1, err)
		}
		last := s.Resume()
		if last != wire.Null {
			last-- // the frame before the first one expected
		}
		subs[i] = &benchSub{sub: s, key: key, unit: unit, resub: resub, last: last}
	}

	// Publishers connect before the clock starts: the window is the time
	// they publish, however long their handshakes take.
	pubs := make([]*benchPub, cfg.Publishers)
	var pubWG sync.WaitGroup
	for i := range pubs {
		var p publisher
		var err error
		if cfg.HTTPPublish {
			p, err = wire.PublishHTTP(ctx, cfg.URL, wire.PublishOptions{DialOptions: cfg.Dial})
		} else {
			p, err = wire.Publish(ctx, cfg.URL, wire.PublishOptions{DialOptions: cfg.Dial, MaxInFlight: cfg.MaxInFlight, Coalesce: cfg.Coalesce})
		}
		if err != nil {
			for _, b := range pubs[:i] {
				b.pub.Close()
			}
			for _, s := range subs {
				s.sub.Close()
			}
			return res, fmt.Errorf("bench: publisher %d: %w", i+1, err)
		}
		pubs[i] = &benchPub{pub: p, gen: gen, rows: cfg.RowsPerFrame, unit: unit, inFlight: cfg.MaxInFlight}
	}
	statsURL := statsURLOf(cfg.URL)
	cpu0, haveCPU := serverCPU(ctx, statsURL, cfg.Dial)
	client0, _ := rusage.Self()
	start := time.Now()
	for _, s := range subs {
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			s.run(runCtx, noteErr)
		}()
	}

	deadline := start.Add(cfg.Duration)
	for _, p := range pubs {
		pubWG.Add(1)
		go func() {
			defer pubWG.Done()
			p.run(runCtx, newPacer(start, cfg.Rate/float64(cfg.Publishers), cfg.RowsPerFrame, time.Now), deadline, noteErr)
		}()
	}

	// The window: publishers stop at the deadline.
	select {
	case <-time.After(time.Until(deadline)):
	case <-ctx.Done():
	}
	pubWG.Wait()
	window := time.Since(start)
	var delivered int64
	for _, s := range subs {
		delivered += s.frames.Load()
	}
	cpu1, haveCPU1 := serverCPU(ctx, statsURL, cfg.Dial)
	client1, _ := rusage.Self()

	// Let subscribers catch up to the last acknowledged offset.
	var lastAcked int64 = wire.Null
	for _, p := range pubs {
		lastAcked = max(lastAcked, p.maxOffset)
	}
	drainEnd := time.Now().Add(cfg.Drain)
	for _, s := range subs {
		for s.seen.Load() < lastAcked && time.Now().Before(drainEnd) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
	cancel() // ends every Recv, and with it every subscriber's run
	subWG.Wait()
	for _, s := range subs {
		s.sub.Close()
	}

	// Summarize.
	var ack, e2e histogram
	for _, p := range pubs {
		res.RowsPublished += p.acked
		res.PublishErrors += p.errors
		ack.merge(&p.lat)
		if res.Durable && p.acked > 0 {
			if res.FirstOffset == 0 || p.minOffset < res.FirstOffset {
				res.FirstOffset = p.minOffset
			}
			res.LastOffset = max(res.LastOffset, p.maxOffset)
		}
	}
	for _, s := range subs {
		s.mu.Lock()
		e2e.merge(&s.lat)
		res.Drops += s.drops
		res.Gaps += s.gaps
		res.SubscriberErrors += s.errs
		if lastAcked != wire.Null && s.seen.Load() < lastAcked {
			res.Missing += lastAcked - s.seen.Load()
		}
		s.mu.Unlock()
	}
	secs := window.Seconds()
	res.DurationS = secs
	res.PublishRowsPerS = float64(res.RowsPublished) / secs
	res.FramesDelivered = delivered
	res.DeliveredPerS = float64(delivered) / secs
	res.AckLatency = ack.summary()
	res.DeliveryLatency = e2e.summary()
	if haveCPU && haveCPU1 {
		res.ServerCPUSeconds = cpu1 - cpu0
		res.ServerCPUPercent = 100 * res.ServerCPUSeconds / secs
	}
	res.ClientCPUSeconds = client1 - client0
	res.ClientCPUPercent = 100 * res.ClientCPUSeconds / secs
	if e := firstErr.Load(); e != nil {
		res.FirstErrorMessage = (*e).Error()
	}
	if res.RowsPublished == 0 && cfg.Publishers > 0 && res.FirstErrorMessage != "" {
		return res, fmt.Errorf("bench: no row was acknowledged: %s", res.FirstErrorMessage)
	}
	return res, ctx.Err()
}

// publisher is what a bench publisher sends through: the Go client's
// WebSocket publisher, or its HTTP one, whose Submit returns only once
// the request is answered.
type publisher interface {
	Submit(ctx context.Context, frame []byte) (*wire.Ack, error)
	Flush()
	Close() error
}

// probeGreeting reads the stream's greeting and compiles its schema
// (nil when the stream declares none), over an event stream when events
// is set, else over a WebSocket.
func probeGreeting(ctx context.Context, cfg Config, events *http.Client) (*wire.Greeting, *schema.Schema, error) {
	var g *wire.Greeting
	if events != nil {
		s, err := dialSSESub(ctx, events, cfg.URL, cfg.Dial, wire.Null)
		if err != nil {
			return nil, nil, err
		}
		s.Close()
		g = s.greeting
	} else {
		probe, err := wire.Subscribe(ctx, cfg.URL, wire.SubscribeOptions{DialOptions: cfg.Dial})
		if err != nil {
			return nil, nil, err
		}
		defer probe.Close()
		sch, err := probe.Schema()
		return probe.Greeting(), sch, err
	}
	if len(g.Schema) == 0 || string(g.Schema) == "null" {
		return g, nil, nil
	}
	sch, err := schema.Compile(g.Schema)
	if err != nil {
		return nil, nil, fmt.Errorf("the greeting's schema does not compile: %w", err)
	}
	return g, sch, nil
}

// benchPub is one publisher of a run. Its counters are read after run returns.
type benchPub struct {
	pub      publisher
	gen      *rowTemplate
	rows     int
	unit     int64
	inFlight int // the publisher's MaxInFlight

	acked     int64
	errors    int64
	minOffset int64 // of the acked rows; meaningful when acked > 0
	maxOffset int64
	lat       histogram
}

type sentFrame struct {
	ack  *wire.Ack
	sent time.Time
}

func (b *benchPub) run(ctx context.Context, pace *pacer, deadline time.Time, noteErr func(error)) {
	pace.beforeSleep = b.pub.Flush
	b.maxOffset = wire.Null
	acks := make(chan sentFrame, b.inFlight+1)
	done := make(chan struct{})
	go func() { // collect acks in send order
		defer close(done)
		for f := range acks {
			<-f.ack.Done() // Wait would flush the burst being built
			offs, err := f.ack.Wait(context.Background())
			b.lat.add(time.Since(f.sent))
			if err != nil {
				b.errors++
				noteErr(err)
				continue
			}
			if n := len(offs); n > 0 {
				if b.acked == 0 || offs[0] < b.minOffset {
					b.minOffset = offs[0]
				}
				b.maxOffset = max(b.maxOffset, offs[n-1])
			}
			b.acked += int64(len(offs))
		}
	}()
	var frame []byte
	for ctx.Err() == nil {
		now, ok := pace.next(ctx, deadline)
		if !ok {
			break
		}
		frame = b.gen.frame(frame[:0], b.rows, now.UnixNano()/b.unit)
		a, err := b.pub.Submit(ctx, frame)
		if err != nil {
			if ctx.Err() == nil {
				noteErr(err)
			}
			break
		}
		acks <- sentFrame{a, now}
	}
	close(acks)
	<-done
	if err := b.pub.Close(); err != nil {
		noteErr(err)
	}
}

// latencyEvery is the sampling interval of publish→receive latency, in frames.
const latencyEvery = 4

// compressTimed is how many compressing subscribers share one that
// inflates and times its rows.
const compressTimed = 25

// subscription is what a bench subscriber reads: the Go client's, a
// compressing one (deflateSub), or an event stream (sseSub).
type subscription interface {
	Recv(ctx context.Context) (*wire.Message, error)
	Resume() int64
	Close() error
}

// benchSub is one subscriber of a run.
type benchSub struct {
	sub   subscription
	resub func(ctx context.Context, offset int64) (subscription, error) // nil: a drop ends the subscriber
	key   []byte                                                        // `"event_ts":`
	unit  int64

	frames atomic.Int64 // frames received
	seen   atomic.Int64 // highest offset received

	mu    sync.Mutex // guards the fields below against close and the summary
	last  int64
	drops int64
	gaps  int64
	errs  int64
	lat   histogram
}

func (b *benchSub) run(ctx context.Context, noteErr func(error)) {
	b.seen.Store(b.last)
	for ctx.Err() == nil {
		m, err := b.sub.Recv(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, wire.ErrClosed) {
				return
			}
			var slow *wire.TooSlow
			if errors.As(err, &slow) && b.resub == nil {
				b.mu.Lock()
				b.drops++
				b.mu.Unlock()
				return
			}
			if errors.As(err, &slow) && slow.Offset != wire.Null {
				b.mu.Lock()
				b.drops++
				b.mu.Unlock()
				b.sub.Close()
				s, rerr := b.resub(ctx, slow.Offset)
				if rerr != nil {
					if ctx.Err() == nil {
						noteErr(rerr)
					}
					return
				}
				b.mu.Lock()
				b.sub = s
				b.mu.Unlock()
				continue
			}
			b.mu.Lock()
			b.errs++
			b.mu.Unlock()
			noteErr(err)
			return
		}
		// Read the clock for every fourth frame only: at millions of frames
		// a second the clock is a tenth of the receive path's cost.
		if b.frames.Load()%latencyEvery == 0 {
			if ts, ok := findInt(m.Row, b.key); ok {
				b.lat.add(time.Duration(time.Now().UnixNano() - ts*b.unit))
			}
		}
		if m.Offset != wire.Null {
			if b.last != wire.Null && m.Offset != b.last+1 {
				b.gaps++
			}
			b.last = m.Offset
			b.seen.Store(m.Offset)
		}
		b.frames.Add(1)
	}
}

// findInt finds key (`"col":`) in a canonical row and parses the integer
// after it, without decoding the row. A canonical row writes an int64
// column as plain decimal digits, optionally signed.
func findInt(row, key []byte) (int64, bool) {
	i := bytes.Index(row, key)
	if i < 0 {
		return 0, false
	}
	j := i + len(key)
	if j < len(row) && row[j] == '-' {
		j++
	}
	k := j
	for k < len(row) && row[k] >= '0' && row[k] <= '9' {
		k++
	}
	if k == j {
		return 0, false // null, or not a number
	}
	n, err := strconv.ParseInt(string(row[i+len(key):k]), 10, 64)
	return n, err == nil
}

package wire

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/streamcast/streamcast/pkg/schema"
)

// BenchConfig describes one load run against a running server.
type BenchConfig struct {
	URL          string        // the stream, ws://host:port/name; a durable stream whose schema has TSColumn
	Publishers   int           // publisher connections (0 = none: measure an existing feed)
	RowsPerFrame int           // rows per publish frame; 1 sends single-row frames, more sends batches
	Rate         float64       // total rows/s across publishers; 0 = as fast as the server acks
	Subscribers  int           // subscriber connections, live from the frontier
	Duration     time.Duration // how long publishers send
	TSColumn     string        // int64 column carrying the send time; default "event_ts"
	TSNanos      bool          // the send time is in ns (default µs)
	MaxInFlight  int           // frames each publisher keeps unanswered; 0 = DefaultMaxInFlight
	Drain        time.Duration // after publishing stops, how long subscribers may take to catch up; 0 = 10 s
	Dial         DialOptions
}

// Validate checks the configuration, naming the bad setting.
func (c *BenchConfig) Validate() error {
	switch {
	case c.URL == "":
		return errors.New("bench needs the stream's URL, e.g. ws://127.0.0.1:8765/demo")
	case c.Publishers < 0 || c.Subscribers < 0:
		return errors.New("publishers and subscribers must be 0 or more")
	case c.Publishers == 0 && c.Subscribers == 0:
		return errors.New("nothing to measure: give publishers, subscribers, or both")
	case c.Publishers > 0 && c.RowsPerFrame < 1:
		return fmt.Errorf("rows per frame is %d; give 1 or more", c.RowsPerFrame)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("rate is %v; give rows/s, or 0 for as fast as possible", c.Rate)
	case c.Duration <= 0:
		return fmt.Errorf("duration is %v; give a positive duration such as 10s", c.Duration)
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

// BenchResult is what a run measured. Rates are over the publishing window
// (Duration); latencies cover every row acked or frame received.
type BenchResult struct {
	URL          string  `json:"url"`
	Stream       string  `json:"stream"`
	Durable      bool    `json:"durable"`
	Publishers   int     `json:"publishers"`
	RowsPerFrame int     `json:"rows_per_frame"`
	TargetRate   float64 `json:"target_rate"` // 0 = max
	Subscribers  int     `json:"subscribers"`
	DurationS    float64 `json:"duration_s"`

	RowsPublished   int64   `json:"rows_published"`     // rows acknowledged
	PublishRowsPerS float64 `json:"publish_rows_per_s"` // acknowledged rows / duration
	PublishErrors   int64   `json:"publish_errors"`     // frames answered with an error
	AckLatency      Latency `json:"ack_latency"`        // frame sent → its ack received

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

// Bench runs the load described by cfg: subscribers attach live first, then
// publishers send frames of generated rows (valid for the greeting's schema,
// the send time in cfg.TSColumn) for cfg.Duration; it then waits for the
// acks and for subscribers to catch up, and reports.
func Bench(ctx context.Context, cfg BenchConfig) (BenchResult, error) {
	if err := cfg.Validate(); err != nil {
		return BenchResult{}, err
	}
	if cfg.TSColumn == "" {
		cfg.TSColumn = "event_ts"
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 10 * time.Second
	}
	res := BenchResult{URL: cfg.URL, Publishers: cfg.Publishers, RowsPerFrame: cfg.RowsPerFrame, TargetRate: cfg.Rate,
		Subscribers: cfg.Subscribers, ServerCPUSeconds: -1, ServerCPUPercent: -1}

	// One probe subscription reads the greeting: schema, durability.
	probe, err := Subscribe(ctx, cfg.URL, SubscribeOptions{DialOptions: cfg.Dial})
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	g := probe.Greeting()
	sch, err := probe.Schema()
	probe.Close()
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

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var firstErr atomic.Pointer[error]
	noteErr := func(err error) {
		firstErr.CompareAndSwap(nil, &err)
	}

	// Subscribers first, so every row published is one they should receive.
	subs := make([]*benchSub, cfg.Subscribers)
	var subWG sync.WaitGroup
	for i := range subs {
		s, err := Subscribe(ctx, cfg.URL, SubscribeOptions{DialOptions: cfg.Dial})
		if err != nil {
			for _, b := range subs[:i] {
				b.sub.Close()
			}
			return res, fmt.Errorf("bench: subscriber %d: %w", i+1, err)
		}
		last := s.Resume()
		if last != Null {
			last-- // the frame before the first one expected
		}
		subs[i] = &benchSub{sub: s, key: key, unit: unit, url: cfg.URL, dial: cfg.Dial, last: last}
	}

	statsURL := statsURLOf(cfg.URL)
	cpu0, haveCPU := serverCPU(ctx, statsURL, cfg.Dial.Header)
	client0 := selfCPU()
	start := time.Now()
	for _, s := range subs {
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			s.run(runCtx, noteErr)
		}()
	}

	pubs := make([]*benchPub, cfg.Publishers)
	var pubWG sync.WaitGroup
	for i := range pubs {
		p, err := Publish(ctx, cfg.URL, PublishOptions{DialOptions: cfg.Dial, MaxInFlight: cfg.MaxInFlight})
		if err != nil {
			for _, b := range pubs[:i] {
				b.pub.Close()
			}
			cancel()
			for _, s := range subs {
				s.sub.Close()
			}
			subWG.Wait()
			return res, fmt.Errorf("bench: publisher %d: %w", i+1, err)
		}
		pubs[i] = &benchPub{pub: p, gen: gen, rows: cfg.RowsPerFrame, unit: unit}
	}
	deadline := start.Add(cfg.Duration)
	for _, p := range pubs {
		pubWG.Add(1)
		go func() {
			defer pubWG.Done()
			p.run(runCtx, deadline, cfg.Rate/float64(cfg.Publishers), noteErr)
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
	cpu1, haveCPU1 := serverCPU(ctx, statsURL, cfg.Dial.Header)
	client1 := selfCPU()

	// Let subscribers catch up to the last acknowledged offset.
	var lastAcked int64 = Null
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
	}
	for _, s := range subs {
		s.mu.Lock()
		e2e.merge(&s.lat)
		res.Drops += s.drops
		res.Gaps += s.gaps
		res.SubscriberErrors += s.errs
		if lastAcked != Null && s.seen.Load() < lastAcked {
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

// benchPub is one publisher of a run. Its counters are read after run returns.
type benchPub struct {
	pub  *Publisher
	gen  *rowTemplate
	rows int
	unit int64

	acked     int64
	errors    int64
	maxOffset int64
	lat       histogram
}

type sentFrame struct {
	ack  *Ack
	sent time.Time
}

func (b *benchPub) run(ctx context.Context, deadline time.Time, rate float64, noteErr func(error)) {
	b.maxOffset = Null
	acks := make(chan sentFrame, cap(b.pub.window)+1)
	done := make(chan struct{})
	go func() { // collect acks in send order
		defer close(done)
		for f := range acks {
			offs, err := f.ack.Wait(context.Background())
			b.lat.add(time.Since(f.sent))
			if err != nil {
				b.errors++
				noteErr(err)
				continue
			}
			b.acked += int64(len(offs))
			if n := len(offs); n > 0 && offs[n-1] > b.maxOffset {
				b.maxOffset = offs[n-1]
			}
		}
	}()
	var interval time.Duration
	if rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(b.rows) / rate)
	}
	next := time.Now()
	var frame []byte
	for ctx.Err() == nil {
		now := time.Now()
		if !now.Before(deadline) {
			break
		}
		if interval > 0 {
			if wait := next.Sub(now); wait > 0 {
				time.Sleep(wait)
				now = time.Now()
			}
			next = next.Add(interval)
			if next.Before(now.Add(-time.Second)) {
				next = now // fell far behind the schedule: do not burst to catch up
			}
		}
		frame = b.gen.frame(frame[:0], b.rows, now.UnixNano()/b.unit)
		a, err := b.pub.submit(ctx, b.rows, func(dst []byte) []byte { return append(dst, frame...) })
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

// benchSub is one subscriber of a run.
type benchSub struct {
	sub  *Subscription
	key  []byte // `"event_ts":`
	unit int64
	url  string
	dial DialOptions

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
			if ctx.Err() != nil || errors.Is(err, ErrClosed) {
				return
			}
			var slow *TooSlow
			if errors.As(err, &slow) && slow.Offset != Null {
				b.mu.Lock()
				b.drops++
				b.mu.Unlock()
				b.sub.Close()
				s, rerr := Subscribe(ctx, b.url, SubscribeOptions{DialOptions: b.dial, Offset: At(slow.Offset)})
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
		if m.Offset != Null {
			if b.last != Null && m.Offset != b.last+1 {
				b.gaps++
			}
			b.last = m.Offset
			b.seen.Store(m.Offset)
		}
		b.frames.Add(1)
	}
}

// findInt finds key (`"col":`) in a canonical row and parses the integer
// after it, without decoding the row.
func findInt(row, key []byte) (int64, bool) {
	i := bytes.Index(row, key)
	if i < 0 {
		return 0, false
	}
	n, _, ok := scanIntOrNull(row, i+len(key), true)
	return n, ok && n != Null
}

// rowTemplate renders rows valid for a schema, the send time in one column.
type rowTemplate struct {
	prefix, suffix []byte // row = prefix + ts + suffix
}

func newRowTemplate(sch *schema.Schema, tsColumn string) (*rowTemplate, error) {
	if sch == nil || sch.IsAny() {
		t := &rowTemplate{prefix: []byte("{" + strconv.Quote(tsColumn) + ":")}
		t.suffix = []byte(`,"bench":"streamcast bench"}`)
		return t, nil
	}
	cols := sch.Columns()
	var b []byte
	t := &rowTemplate{}
	found := false
	b = append(b, '{')
	for i := range cols {
		c := &cols[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, c.Name)
		b = append(b, ':')
		if c.Name == tsColumn {
			if c.Type == nil || c.Type.ID() != arrow.INT64 {
				return nil, fmt.Errorf("column %q is %v, not int64; pass --ts-column naming an int64 column", tsColumn, c.Type)
			}
			t.prefix = append([]byte(nil), b...)
			b = b[:0]
			found = true
			continue
		}
		var err error
		if b, err = benchValue(b, c); err != nil {
			return nil, err
		}
	}
	b = append(b, '}')
	if !found {
		names := make([]string, len(cols))
		for i := range cols {
			names[i] = cols[i].Name
		}
		return nil, fmt.Errorf("the schema has no column %q to carry the send time (columns: %v); pass --ts-column naming an int64 column", tsColumn, names)
	}
	t.suffix = b
	return t, nil
}

// frame appends a publish frame of n rows stamped ts: a row object when n
// is 1, else a batch array.
func (t *rowTemplate) frame(dst []byte, n int, ts int64) []byte {
	if n > 1 {
		dst = append(dst, '[')
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, t.prefix...)
		dst = strconv.AppendInt(dst, ts, 10)
		dst = append(dst, t.suffix...)
	}
	if n > 1 {
		dst = append(dst, ']')
	}
	return dst
}

// benchValue appends a valid value for column c.
func benchValue(b []byte, c *schema.Column) ([]byte, error) {
	if c.Type == nil {
		return nil, fmt.Errorf("column %q has no type", c.Name)
	}
	switch c.Type.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return append(b, "42"...), nil
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
		return append(b, "1.5"...), nil
	case arrow.BOOL:
		return append(b, "true"...), nil
	case arrow.STRING, arrow.LARGE_STRING:
		return append(b, `"bench"`...), nil
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY:
		n := 4
		if fs, ok := c.Type.(*arrow.FixedSizeBinaryType); ok {
			n = fs.ByteWidth
		}
		raw := make([]byte, n)
		for i := range raw {
			raw[i] = byte(i * 37)
		}
		if c.Encoding == schema.EncodingBase64 {
			return AppendString(b, base64.StdEncoding.EncodeToString(raw)), nil
		}
		return AppendString(b, hex.EncodeToString(raw)), nil
	case arrow.STRUCT:
		b = append(b, '{')
		for i := range c.Children {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, c.Children[i].Name)
			b = append(b, ':')
			var err error
			if b, err = benchValue(b, &c.Children[i]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST:
		if len(c.Children) != 1 {
			return nil, fmt.Errorf("list column %q has %d item types", c.Name, len(c.Children))
		}
		n := 1
		if fl, ok := c.Type.(*arrow.FixedSizeListType); ok {
			n = int(fl.Len())
		}
		b = append(b, '[')
		for i := 0; i < n; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = benchValue(b, &c.Children[0]); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case arrow.MAP:
		if len(c.Children) != 2 {
			return nil, fmt.Errorf("map column %q has %d children", c.Name, len(c.Children))
		}
		b = append(b, `{"k":`...)
		b, err := benchValue(b, &c.Children[1])
		if err != nil {
			return nil, err
		}
		return append(b, '}'), nil
	case arrow.NULL:
		return append(b, "null"...), nil
	}
	if c.Nullable {
		return append(b, "null"...), nil
	}
	return nil, fmt.Errorf("bench cannot generate a value for column %q of type %v", c.Name, c.Type)
}

// statsURLOf maps ws://host/stream to http://host/stats.
func statsURLOf(stream string) string {
	u, err := url.Parse(stream)
	if err != nil {
		return ""
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	}
	u.Path, u.RawPath, u.RawQuery, u.Fragment = "/stats", "", "", ""
	return u.String()
}

// serverCPU reads process.cpu_seconds from /stats; ok is false when the
// server does not report it.
func serverCPU(ctx context.Context, statsURL string, h http.Header) (float64, bool) {
	if statsURL == "" {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, statsURL, nil)
	if err != nil {
		return 0, false
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	var st struct {
		Process struct {
			CPUSeconds *float64 `json:"cpu_seconds"`
		} `json:"process"`
	}
	if json.NewDecoder(resp.Body).Decode(&st) != nil || st.Process.CPUSeconds == nil {
		return 0, false
	}
	return *st.Process.CPUSeconds, true
}

// histogram is a log-linear latency histogram over nanoseconds: 32 buckets
// per power of two (under 1.6% error from a bucket's middle), no allocation
// per sample.
type histogram struct {
	counts [2048]uint64
	n      int64
	max    int64
}

func bucketOf(v int64) int {
	if v < 64 {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - 6 // v >> e is in [32, 64)
	return e*32 + int(v>>e)
}

// bucketLow is the smallest value in bucket i.
func bucketLow(i int) int64 {
	if i < 64 {
		return int64(i)
	}
	e := (i - 32) / 32
	return int64(i-e*32) << e
}

func (h *histogram) add(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0 // clocks of sender and receiver are the same machine's; a negative is jitter
	}
	i := bucketOf(v)
	if i >= len(h.counts) {
		i = len(h.counts) - 1
	}
	h.counts[i]++
	h.n++
	if v > h.max {
		h.max = v
	}
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

func (h *histogram) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank && c > 0 {
			lo, hi := bucketLow(i), bucketLow(i+1)
			return min((lo+hi)/2, h.max)
		}
	}
	return h.max
}

func (h *histogram) summary() Latency {
	ms := func(ns int64) float64 { return math.Round(float64(ns)/1e3) / 1e3 }
	return Latency{Count: h.n, P50: ms(h.quantile(0.50)), P99: ms(h.quantile(0.99)), Max: ms(h.max)}
}

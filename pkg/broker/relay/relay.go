package relay

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/internal/waitfor"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// Follower states, as /stats reports them.
const (
	Connecting = "connecting" // dialling the upstream, or waiting to retry
	Mirroring  = "mirroring"  // subscribed, committing what arrives
	Stopped    = "stopped"    // stopped for good (too_old, a gap, another stream): see error
)

// Backoff: the first retry after a drop is quick, later ones slow down to
// maxBackoff so a down upstream is not hammered.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
	// GreetingWait bounds how long Open waits for the upstream's
	// greeting, which carries the schema the relay's log is opened with.
	GreetingWait = 20 * time.Second
	// queueRows is the rows read from the upstream ahead of the commit;
	// past it the reader waits, and the upstream's backpressure (4429)
	// applies to the relay like any subscriber.
	queueRows = 16384
	// earliestTries bounds how often Earliest asks again when the
	// upstream's replay window moved past the start it computed from a
	// too_old refusal (the window slides with every commit there).
	earliestTries = 8
)

// ErrStop marks an error after which mirroring stops for good: going on
// could only skip or invent rows. A Target's Commit wraps it to stop the
// Follower.
var ErrStop = errors.New("relay stopped")

// Target is the relay stream a Follower feeds: its log's end, the schema it
// serves, its commit and its fan-out.
type Target interface {
	// Durable reports whether the stream keeps a log; a live-only
	// relay's rows are only fanned out.
	Durable() bool
	// End is the offset the next row committed to the log gets (durable
	// only).
	End() int64
	// SchemaJSON is the canonical schema the stream serves (nil for any).
	SchemaJSON() []byte
	// Commit appends rows at first with their stamps (durable only). An
	// error wrapping ErrStop stops the Follower; any other ends the
	// session, which resumes from End.
	Commit(first int64, rows [][]byte, ts []int64) error
	// Deliver fans committed (or, live-only, received) frames out; first
	// is rows[0]'s offset and next one past the last (both wire.Null when
	// live-only).
	Deliver(frames, rows [][]byte, first, next int64)
}

// Config says which upstream a Follower mirrors and how.
type Config struct {
	URL         string        // the upstream stream's URL, without credentials: safe to print
	Credentials *url.Userinfo // sent to the upstream, if any
	TLS         *tls.Config   // for a wss:// upstream: the CAs trusted; nil = the system's
	// StreamID is the upstream's stream_id the relay's log was made from
	// (the relay keeps it beside the log); "" takes the first greeting's.
	// A greeting with another stops mirroring (I8).
	StreamID string
	// Home is the relay's stream directory, named in the stop that another
	// stream behind the URL causes: moving it aside is the way out.
	Home string
	// Self is the relay stream's entry in wire.RelayChainHeader
	// (SERVER-ID/STREAM): an upstream whose chain holds it is the relay
	// itself, reached round a loop of relays, and the Follower refuses
	// to mirror it.
	Self     string
	MaxGroup int         // the most rows handed to one Commit
	Logger   *log.Logger // where drops, retries and the stop are logged; nil discards them
}

// Stats are a Follower's figures for /stats.
type Stats struct {
	Upstream   string
	State      string
	Error      string
	Since      time.Time // when State was entered
	Reconnects int64
	Received   int64 // rows committed (or, live-only, fanned out)
}

// A Follower is a relay stream's mirroring loop and its state for /stats.
// The stream owns it: Start runs it, Stop cancels it and waits.
type Follower struct {
	cfg Config
	t   Target

	// The upstream's identity, from its first greeting; every later
	// greeting must carry the same, or the relay stops (I8).
	streamID, metadata, hint string

	// next is where a live-only relay resumes (one past the last offset it
	// relayed; wire.Null before any). Only the mirroring goroutine uses it.
	next int64

	mu         sync.Mutex // guards the /stats fields below
	state      string
	lastErr    string
	since      time.Time
	reconnects int64
	received   atomic.Int64

	// refused is why Open's greeting may not be mirrored (another stream
	// than the log's); run stops on it at once.
	refused error

	// parked is the subscription Earliest opened, which the first session
	// reads from so that no row between the two is lost; nil once used.
	parked *wire.Subscription

	// chain is the upstream's wire.RelayChainHeader from the last
	// handshake, which this server passes on after its own id.
	chainMu sync.Mutex
	chain   []string

	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Follower of cfg.URL, connecting.
func New(cfg Config) *Follower {
	if cfg.Logger == nil {
		cfg.Logger = log.New(io.Discard)
	}
	if cfg.MaxGroup <= 0 {
		cfg.MaxGroup = 1
	}
	return &Follower{cfg: cfg, streamID: cfg.StreamID, next: wire.Null, state: Connecting, since: time.Now()}
}

// URL is the upstream's URL, without credentials.
func (f *Follower) URL() string { return f.cfg.URL }

// Identity is the upstream's stream_id, metadata and metadata hint, as its
// greeting to Open carried them: a relay's identity and history are its
// upstream's.
func (f *Follower) Identity() (streamID, metadata, hint string) {
	return f.streamID, f.metadata, f.hint
}

// Stats returns the Follower's figures for /stats.
func (f *Follower) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Stats{
		Upstream:   f.cfg.URL,
		State:      f.state,
		Error:      f.lastErr,
		Since:      f.since,
		Reconnects: f.reconnects,
		Received:   f.received.Load(),
	}
}

func (f *Follower) setState(state string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if state != f.state {
		f.since = time.Now()
	}
	f.state = state
	if err != nil {
		f.lastErr = err.Error()
	} else if state == Mirroring {
		f.lastErr = ""
	}
}

// Open dials the upstream until it greets, with backoff, for at most
// GreetingWait, and keeps the identity the greeting carries; the caller
// reads the schema from it.
func (f *Follower) Open(ctx context.Context) (*wire.Greeting, error) {
	ctx, cancel := context.WithTimeout(ctx, GreetingWait)
	defer cancel()
	wait := minBackoff
	for {
		sub, err := wire.Subscribe(ctx, f.cfg.URL, f.options(nil))
		if err == nil {
			g := sub.Greeting()
			_ = sub.Close()
			if err := f.checkLoop(); err != nil {
				return nil, err
			}
			if f.streamID == "" {
				f.streamID = g.StreamID
			}
			f.metadata, f.hint = g.Metadata, g.MetadataHint
			// Another stream behind the URL is not a reason to refuse to
			// serve the rows the log holds; it stops mirroring, at once
			// (run), before a refusal by the other stream's numbers
			// could say something less clear.
			f.refused = f.checkID(g)
			return g, nil
		}
		var ref wire.Refusal
		var denied *wire.AccessDenied
		if errors.As(err, &ref) || (errors.As(err, &denied) && denied.Status != http.StatusTooManyRequests) {
			return nil, err // the upstream answered: retrying would get the same
		}
		var untrusted *tls.CertificateVerificationError
		if errors.As(err, &untrusted) {
			return nil, err // the same certificate would fail again: the fix is in the config
		}
		if !waitfor.Sleep(ctx, wait) {
			return nil, err
		}
		wait = min(2*wait, maxBackoff)
	}
}

// options are the subscribe options of a session starting at offset (nil:
// live, from the upstream's frontier). A relay follows another server,
// across a network where it is worth one, so it always offers
// compression, even to an upstream on its own host.
func (f *Follower) options(offset *int64) wire.SubscribeOptions {
	return wire.SubscribeOptions{
		Offset:      offset,
		DialOptions: wire.DialOptions{Credentials: f.cfg.Credentials, TLS: f.cfg.TLS, OnHandshake: f.handshake, Compression: wire.CompressOn},
	}
}

// handshake keeps the upstream's relay chain from its 101 answer.
func (f *Follower) handshake(h http.Header) {
	var chain []string
	for _, id := range strings.Split(h.Get(wire.RelayChainHeader), ",") {
		if id = strings.TrimSpace(id); id != "" && len(chain) < wire.MaxRelayChain {
			chain = append(chain, id)
		}
	}
	f.chainMu.Lock()
	f.chain = chain
	f.chainMu.Unlock()
}

// Chain is the upstream's relay chain as its last handshake gave it.
func (f *Follower) Chain() []string {
	f.chainMu.Lock()
	defer f.chainMu.Unlock()
	return f.chain
}

// checkLoop refuses an upstream whose chain holds this server: the rows
// would come round to where they started, and both ends would report
// mirroring while neither had a writer.
func (f *Follower) checkLoop() error {
	if f.cfg.Self == "" || !slices.Contains(f.Chain(), f.cfg.Self) {
		return nil
	}
	return fmt.Errorf("%w: relay loop: the upstream %s relays, directly or through other relays, this stream itself (server/stream on the way: %s), so no stream in the loop has a writer; "+
		"remove upstream: from one of the streams in the loop", ErrStop, f.cfg.URL, strings.Join(f.Chain(), " → "))
}

// Earliest subscribes to the upstream at the earliest offset it will
// replay and returns that offset: where a relay with an empty log starts,
// since the upstream serves nothing further back. That is its earliest
// row, or, with max_replay, the oldest its window still reaches (a
// too_old refusal gives the numbers; the window slides meanwhile, so it
// asks again), or its frontier when it holds no rows. The subscription
// stays open for the first session, so no row published in between is
// missed. Call it after Open and before Start.
func (f *Follower) Earliest(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, GreetingWait)
	defer cancel()
	at := int64(0) // 0 is the earliest row
	var last error
	for range earliestTries {
		sub, err := wire.Subscribe(ctx, f.cfg.URL, f.options(wire.At(at)))
		if err == nil {
			g := sub.Greeting()
			if err := f.checkID(g); err != nil {
				_ = sub.Close()
				return 0, err
			}
			if g.Replay == nil {
				_ = sub.Close()
				return 0, fmt.Errorf("the upstream %s greeted a subscription at offset %d without a replay window; is it a durable stream?", f.cfg.URL, at)
			}
			f.parked = sub
			return g.Replay.Start, nil
		}
		var nr *wire.NotReplayable
		if !errors.As(err, &nr) {
			return 0, err
		}
		switch {
		case nr.Why == wire.WhyTooOld && nr.MaxReplay != wire.Null && nr.EndOffset != wire.Null:
			at = max(nr.EndOffset-nr.MaxReplay, 1)
		case nr.Why == wire.WhyEmpty && nr.EndOffset != wire.Null:
			// Every row it held is gone (its retention): start at its
			// frontier, an empty replay, with the rows to come.
			at = nr.EndOffset
		case nr.Why == wire.WhyEvicted && nr.Earliest != wire.Null:
			at = nr.Earliest
		default:
			return 0, err
		}
		last = err
	}
	return 0, fmt.Errorf("the upstream %s refused %d starts in a row, its replay window moving past each: %w; raise its max_replay, or start the relay when it is less busy", f.cfg.URL, earliestTries, last)
}

// Start runs the mirroring loop into t until Stop. It returns a channel
// closed when the loop has returned.
func (f *Follower) Start(t Target) <-chan struct{} {
	f.t = t
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.done = make(chan struct{})
	go func() {
		defer close(f.done)
		f.run(ctx)
	}()
	return f.done
}

// Stop ends the mirroring loop and waits for it; rows already committed
// have been fanned out.
func (f *Follower) Stop() {
	if f.cancel == nil {
		if f.parked != nil {
			_ = f.parked.Close()
			f.parked = nil
		}
		return
	}
	f.cancel()
	<-f.done
}

// run mirrors the upstream until ctx ends or mirroring must stop: each
// session subscribes from the relay's end and commits what arrives; a
// dropped one is retried with backoff, a 4429 at once.
func (f *Follower) run(ctx context.Context) {
	logger := f.cfg.Logger
	wait := minBackoff
	for {
		f.setState(Connecting, nil)
		var progressed bool
		err := f.refused
		if err == nil {
			progressed, err = f.session(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		var slow *wire.TooSlow
		var nr *wire.NotReplayable
		switch {
		case errors.Is(err, ErrStop), errors.As(err, &nr):
			f.setState(Stopped, err)
			logger.Error("relay stopped mirroring; its subscribers get no new rows until the cause is fixed and serve restarts", "err", err)
			return
		case errors.As(err, &slow):
			logger.Warn("the upstream dropped the relay as too slow (4429); resuming at once", "offset", slow.Offset)
			wait = 0
		case progressed:
			logger.Warn("lost the upstream; reconnecting", "err", err)
			wait = minBackoff
		default:
			logger.Warn("cannot reach the upstream; retrying", "err", err, "in", wait)
		}
		f.mu.Lock()
		f.reconnects++
		f.lastErr = err.Error()
		f.mu.Unlock()
		if !waitfor.Sleep(ctx, wait) {
			return
		}
		wait = min(max(2*wait, minBackoff), maxBackoff)
	}
}

// relayed is one frame read from the upstream: its offset and stamp, its
// payload as it came, and the row within it.
type relayed struct {
	off, ts      int64
	payload, row []byte
}

// session is one subscription to the upstream: a reader goroutine receives
// frames into a bounded queue, and this goroutine commits and fans out
// whatever has queued, as one group. It returns why the session ended
// (never nil) and whether any row arrived.
func (f *Follower) session(ctx context.Context) (progressed bool, err error) {
	from := f.next
	if f.t.Durable() {
		from = f.t.End()
	}
	var at *int64
	if from != wire.Null {
		at = wire.At(from)
	}
	sub := f.parked
	f.parked = nil
	if sub == nil || sub.Greeting().Replay == nil || sub.Greeting().Replay.Start != from {
		if sub != nil {
			_ = sub.Close()
		}
		var err error
		if sub, err = wire.Subscribe(ctx, f.cfg.URL, f.options(at)); err != nil {
			return false, err
		}
	}
	if err := f.checkLoop(); err != nil {
		_ = sub.Close()
		return false, err
	}
	if err := f.check(sub.Greeting()); err != nil {
		_ = sub.Close()
		return false, err
	}
	queue := make(chan relayed, queueRows)
	quit := make(chan struct{})
	var readErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(queue)
		for {
			m, err := sub.Recv(ctx)
			if err != nil {
				readErr = err
				return
			}
			// Row lies at the end of the frame, before its closing ']'
			// (wire's parseFrame); a frame with other spacing fails the
			// check in commit.
			p := append([]byte(nil), m.Frame()...)
			end := len(p) - 1
			select {
			case queue <- relayed{off: m.Offset, ts: m.TS, payload: p, row: p[end-len(m.Row) : end : end]}:
			case <-quit:
				return
			}
		}
	}()
	defer func() {
		close(quit)
		_ = sub.Close()
		wg.Wait()
	}()
	f.setState(Mirroring, nil)

	batch := make([]relayed, 0, 256)
	for {
		batch = batch[:0]
		select {
		case m, ok := <-queue:
			if !ok {
				wg.Wait()
				return progressed, readErr
			}
			batch = append(batch, m)
		case <-ctx.Done():
			return progressed, ctx.Err()
		}
	more:
		for len(batch) < f.cfg.MaxGroup {
			select {
			case m, ok := <-queue:
				if !ok {
					break more
				}
				batch = append(batch, m)
			default:
				break more
			}
		}
		if err := f.commit(batch); err != nil {
			return progressed, err
		}
		progressed = true
	}
}

// check compares a greeting with the identity and schema the relay serves:
// another stream behind the same URL is never mirrored into this one.
func (f *Follower) check(g *wire.Greeting) error {
	if err := f.checkID(g); err != nil {
		return err
	}
	var now []byte
	if len(g.Schema) > 0 && !bytes.Equal(g.Schema, []byte("null")) {
		sch, err := schema.Compile(g.Schema)
		if err != nil {
			return fmt.Errorf("%w: the upstream's schema no longer compiles here: %v", ErrStop, err)
		}
		now = sch.JSON()
	}
	if !bytes.Equal(now, f.t.SchemaJSON()) {
		return fmt.Errorf("%w: the upstream's schema changed (a migrate there?); restart serve so the relay serves the new one", ErrStop)
	}
	return nil
}

// checkID refuses a greeting from another stream than the one the relay's
// log holds: its offsets are not this one's (I8).
func (f *Follower) checkID(g *wire.Greeting) error {
	if f.streamID == "" || g.StreamID == f.streamID {
		return nil
	}
	way := "restart serve once the URL serves that stream again"
	if f.cfg.Home != "" {
		way = fmt.Sprintf("to mirror the new stream, stop serve, move the relay's directory %s aside and start serve again (the relay then starts afresh); or point upstream: at the stream it was mirroring", f.cfg.Home)
	}
	return fmt.Errorf("%w: the upstream %s is now stream_id %q, but the relay's log holds stream_id %q: another stream (recreated there?), whose offsets are not the log's; %s",
		ErrStop, f.cfg.URL, g.StreamID, f.streamID, way)
}

// commit commits one batch (durable relays) and fans it out. Every frame
// the relay sends is built from the stored row as a replay would build it
// (I4), and checked against the upstream's bytes, so the two nodes' frames
// are the same.
func (f *Follower) commit(batch []relayed) error {
	durable := f.t.Durable()
	first := batch[0].off
	rows := make([][]byte, len(batch))
	size := 0
	for i := range batch {
		m := &batch[i]
		if durable && (m.off == wire.Null || m.off != first+int64(i)) {
			return fmt.Errorf("%w: the upstream sent offset %s after %d; a durable relay needs every offset in order", ErrStop, offsetText(m.off), first+int64(i)-1)
		}
		rows[i] = m.row
		size += len(m.payload) + 10
	}
	arena := make([]byte, 0, size)
	var scratch []byte
	frames := make([][]byte, len(batch))
	for i := range batch {
		m := &batch[i]
		start := len(arena)
		if durable {
			scratch = wire.AppendFrame(scratch[:0], m.off, m.ts, rows[i])
			if !bytes.Equal(scratch, m.payload) {
				return fmt.Errorf("%w: the upstream's frame at offset %d is not in the form this server writes, so relayed and replayed frames would differ", ErrStop, m.off)
			}
			arena = wire.AppendDataFrame(arena, m.off, m.ts, rows[i])
		} else {
			// Live only: nothing is stored, so the upstream's frame is
			// passed on as it came.
			arena = append(arena, wire.TextFrame(m.payload)...)
		}
		frames[i] = arena[start:len(arena):len(arena)]
	}
	if !durable {
		f.received.Add(int64(len(batch)))
		f.t.Deliver(frames, rows, wire.Null, wire.Null)
		if last := batch[len(batch)-1].off; last != wire.Null {
			f.next = last + 1
		}
		return nil
	}
	ts := make([]int64, len(batch))
	for i := range batch {
		ts[i] = batch[i].ts
	}
	if end := f.t.End(); first != end {
		return fmt.Errorf("%w: the upstream sent offset %d, but the relay's log ends at %d; it would leave a gap", ErrStop, first, end)
	}
	if err := f.t.Commit(first, rows, ts); err != nil {
		return err
	}
	// Counted before the fan-out: a client that saw a row sees it counted.
	f.received.Add(int64(len(batch)))
	f.t.Deliver(frames, rows, first, first+int64(len(rows)))
	return nil
}

// offsetText renders an offset for a message, null as "null".
func offsetText(v int64) string {
	if v == wire.Null {
		return "null"
	}
	return strconv.FormatInt(v, 10)
}

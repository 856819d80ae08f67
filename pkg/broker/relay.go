package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamcast/streamcast/internal/waitfor"
	"github.com/streamcast/streamcast/pkg/broker/frame"
	"github.com/streamcast/streamcast/pkg/broker/stats"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// A relay stream (upstream: in its config) mirrors a stream of another
// server. It subscribes there from its own end, commits what arrives to its
// own log at the same offsets, with the same stamps and row bytes
// (logstore.AppendAt), and fans it out like any committed group, so its
// subscribers get frames byte-identical to the upstream's and can move
// between the nodes, resuming by offset. It never assigns an offset itself:
// the upstream is the one writer of the stream (I7 across machines), and a
// row that would leave a gap is never committed (I1, I6).

// Relay states, as /stats reports them.
const (
	relayConnecting = "connecting" // dialling the upstream, or waiting to retry
	relayMirroring  = "mirroring"  // subscribed, committing what arrives
	relayStopped    = "stopped"    // stopped for good (too_old, a gap, another stream): see error
)

// Relay backoff: the first retry after a drop is quick, later ones slow
// down to relayMaxBackoff so a down upstream is not hammered.
const (
	relayMinBackoff = 100 * time.Millisecond
	relayMaxBackoff = 5 * time.Second
	// relayGreetingWait bounds how long open waits for the upstream's
	// greeting, which carries the schema the relay's log is opened with.
	relayGreetingWait = 20 * time.Second
	// relayQueue is the rows read from the upstream ahead of the commit;
	// past it the reader waits, and the upstream's backpressure (4429)
	// applies to the relay like any subscriber.
	relayQueue = 16384
)

// errRelayStop marks an error after which mirroring stops for good: going
// on could only skip or invent rows.
var errRelayStop = errors.New("relay stopped")

// relay is a relay stream's mirroring loop and its state for /stats. The
// stream owns it: start runs it, stop cancels it and waits.
type relay struct {
	st   *stream
	url  string        // the upstream's URL, without credentials: safe to print
	cred *url.Userinfo // the credentials its user info held, if any

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

	cancel context.CancelFunc
	done   chan struct{}
}

// relayStats is what /stats reports of a relay stream.
func (r *relay) stats() *stats.RelayStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &stats.RelayStats{
		Upstream:     r.url,
		State:        r.state,
		Error:        r.lastErr,
		SinceTS:      unixSeconds(r.since),
		Reconnects:   r.reconnects,
		RowsMirrored: r.received.Load(),
	}
}

func (r *relay) setState(state string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if state != r.state {
		r.since = time.Now()
	}
	r.state = state
	if err != nil {
		r.lastErr = err.Error()
	} else if state == relayMirroring {
		r.lastErr = ""
	}
}

// openRelay prepares a relay stream: it reads the upstream's greeting for
// the schema and identity the relay serves, then opens the stream's log
// with that schema (durable relays) as open does for any stream.
func (s *stream) openRelay(ctx context.Context, root string) error {
	clean, cred, err := s.cfg.UpstreamURL()
	if err != nil {
		return fmt.Errorf("stream %q: upstream: %w", s.name, err)
	}
	if cred == nil {
		cred = s.srv.opts.UpstreamCredentials
	}
	r := &relay{st: s, url: clean, cred: cred, next: wire.Null, state: relayConnecting, since: time.Now()}
	g, err := r.greeting(ctx)
	if err != nil {
		return fmt.Errorf("stream %q relays %s, whose greeting carries the schema the relay serves, and got none: %w; "+
			"start the upstream first (serve waits %s for it), or check the URL and its credentials",
			s.name, clean, err, relayGreetingWait)
	}
	if s.cfg.Durable && !g.Durable {
		return fmt.Errorf("stream %q is a durable relay of %s, which is live-only: its rows have no offsets to keep; set durable: false on the relay", s.name, clean)
	}
	sch := schema.Any()
	if len(g.Schema) > 0 && !bytes.Equal(g.Schema, []byte("null")) {
		if sch, err = schema.Compile(g.Schema); err != nil {
			return fmt.Errorf("stream %q: the schema of its upstream %s does not compile here: %w", s.name, clean, err)
		}
	}
	s.sch = sch
	s.schemaJSON = nil
	if !sch.IsAny() {
		s.schemaJSON = sch.JSON()
	}
	r.streamID, r.metadata, r.hint = g.StreamID, g.Metadata, g.MetadataHint
	s.relay = r
	if !s.cfg.Durable {
		s.end = wire.Null
		s.endOffset.Store(wire.Null)
		return nil
	}
	if err := s.openLog(ctx, root); err != nil {
		return err
	}
	// The log is a cache: serve's seal, compact and clean children keep
	// it by the tiers' retention, and nothing publishes it (cacheLogs).
	return nil
}

// greeting dials the upstream until it greets, with backoff, for at most
// relayGreetingWait.
func (r *relay) greeting(ctx context.Context) (*wire.Greeting, error) {
	ctx, cancel := context.WithTimeout(ctx, relayGreetingWait)
	defer cancel()
	wait := relayMinBackoff
	for {
		sub, err := wire.Subscribe(ctx, r.url, wire.SubscribeOptions{DialOptions: wire.DialOptions{Credentials: r.cred}})
		if err == nil {
			g := sub.Greeting()
			_ = sub.Close()
			return g, nil
		}
		var ref wire.Refusal
		var denied *wire.AccessDenied
		if errors.As(err, &ref) || (errors.As(err, &denied) && denied.Status != http.StatusTooManyRequests) {
			return nil, err // the upstream answered: retrying would get the same
		}
		if !waitfor.Sleep(ctx, wait) {
			return nil, err
		}
		wait = min(2*wait, relayMaxBackoff)
	}
}

// startRelay runs the relay's mirroring loop until stop.
func (s *stream) startRelay() {
	r := s.relay
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.done = make(chan struct{})
	s.life.committed = r.done
	go func() {
		defer close(r.done)
		r.run(ctx)
	}()
}

// stop ends the mirroring loop and waits for it; rows already committed
// have been fanned out.
func (r *relay) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
}

// run mirrors the upstream until ctx ends or mirroring must stop: each
// session subscribes from the relay's end and commits what arrives; a
// dropped one is retried with backoff, a 4429 at once.
func (r *relay) run(ctx context.Context) {
	log := r.st.srv.logger.With("stream", r.st.name, "upstream", r.url)
	wait := relayMinBackoff
	for {
		r.setState(relayConnecting, nil)
		progressed, err := r.session(ctx)
		if ctx.Err() != nil {
			return
		}
		var slow *wire.TooSlow
		var nr *wire.NotReplayable
		switch {
		case errors.Is(err, errRelayStop), errors.As(err, &nr):
			r.setState(relayStopped, err)
			log.Error("relay stopped mirroring; its subscribers get no new rows until the cause is fixed and serve restarts", "err", err)
			return
		case errors.As(err, &slow):
			log.Warn("the upstream dropped the relay as too slow (4429); resuming at once", "offset", slow.Offset)
			wait = 0
		case progressed:
			log.Warn("lost the upstream; reconnecting", "err", err)
			wait = relayMinBackoff
		default:
			log.Warn("cannot reach the upstream; retrying", "err", err, "in", wait)
		}
		r.mu.Lock()
		r.reconnects++
		r.lastErr = err.Error()
		r.mu.Unlock()
		if !waitfor.Sleep(ctx, wait) {
			return
		}
		wait = min(max(2*wait, relayMinBackoff), relayMaxBackoff)
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
func (r *relay) session(ctx context.Context) (progressed bool, err error) {
	s := r.st
	from := r.next
	if s.log != nil {
		s.mu.Lock()
		from = s.end
		s.mu.Unlock()
	}
	opts := wire.SubscribeOptions{DialOptions: wire.DialOptions{Credentials: r.cred}}
	if from != wire.Null {
		opts.Offset = wire.At(from)
	}
	sub, err := wire.Subscribe(ctx, r.url, opts)
	if err != nil {
		return false, err
	}
	if err := r.check(sub.Greeting()); err != nil {
		_ = sub.Close()
		return false, err
	}
	queue := make(chan relayed, relayQueue)
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
			// (parseFrame); a frame with other spacing fails the check in
			// commit.
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
	r.setState(relayMirroring, nil)

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
		for len(batch) < maxGroupRows {
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
		if err := r.commit(batch); err != nil {
			return progressed, err
		}
		progressed = true
	}
}

// check compares a greeting with the identity and schema the relay serves:
// another stream behind the same URL is never mirrored into this one.
func (r *relay) check(g *wire.Greeting) error {
	if r.streamID != "" && g.StreamID != r.streamID {
		return fmt.Errorf("%w: the upstream's stream_id is now %q, not %q as when the relay started; it is another stream, and its offsets are not this one's", errRelayStop, g.StreamID, r.streamID)
	}
	var now []byte
	if len(g.Schema) > 0 && !bytes.Equal(g.Schema, []byte("null")) {
		sch, err := schema.Compile(g.Schema)
		if err != nil {
			return fmt.Errorf("%w: the upstream's schema no longer compiles here: %v", errRelayStop, err)
		}
		now = sch.JSON()
	}
	if !bytes.Equal(now, r.st.schemaJSON) {
		return fmt.Errorf("%w: the upstream's schema changed (a migrate there?); restart serve so the relay serves the new one", errRelayStop)
	}
	return nil
}

// commit commits one batch (durable relays) and fans it out. Every frame
// the relay sends is built from the stored row as a replay would build it
// (I4), and checked against the upstream's bytes, so the two nodes' frames
// are the same.
func (r *relay) commit(batch []relayed) error {
	s := r.st
	first := batch[0].off
	rows := make([][]byte, len(batch))
	size := 0
	for i := range batch {
		m := &batch[i]
		if s.log != nil && (m.off == wire.Null || m.off != first+int64(i)) {
			return fmt.Errorf("%w: the upstream sent offset %s after %d; a durable relay needs every offset in order", errRelayStop, offsetText(m.off), first+int64(i)-1)
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
		if s.log != nil {
			scratch = wire.AppendFrame(scratch[:0], m.off, m.ts, rows[i])
			if !bytes.Equal(scratch, m.payload) {
				return fmt.Errorf("%w: the upstream's frame at offset %d is not in the form this server writes, so relayed and replayed frames would differ", errRelayStop, m.off)
			}
			arena = frame.AppendData(arena, m.off, m.ts, rows[i])
		} else {
			// Live only: nothing is stored, so the upstream's frame is
			// passed on as it came.
			arena = append(arena, frame.Text(m.payload)...)
		}
		frames[i] = arena[start:len(arena):len(arena)]
	}
	if s.log == nil {
		r.received.Add(int64(len(batch)))
		s.deliver(frames, rows, wire.Null, wire.Null)
		if last := batch[len(batch)-1].off; last != wire.Null {
			r.next = last + 1
		}
		return nil
	}
	ts := make([]int64, len(batch))
	for i := range batch {
		ts[i] = batch[i].ts
	}
	s.mu.Lock()
	end := s.end
	s.mu.Unlock()
	if first != end {
		return fmt.Errorf("%w: the upstream sent offset %d, but the relay's log ends at %d; it would leave a gap", errRelayStop, first, end)
	}
	// Not cancelled with the session: a commit under way finishes, and is
	// fanned out, so what the log holds is what subscribers were offered.
	if err := s.log.AppendAt(context.Background(), first, rows, ts); err != nil {
		if errors.Is(err, logstore.ErrNotContiguous) {
			return fmt.Errorf("%w: %v", errRelayStop, err)
		}
		s.srv.commitErrs.Error(context.Background(), s.name, "relay commit failed; retrying from the log's end", "stream", s.name, "rows", len(rows), "err", err)
		return err
	}
	s.srv.commitErrs.Recovered(context.Background(), s.name, "relay commits succeed again", "stream", s.name)
	if m := s.m; m != nil {
		m.RowsCommitted.Add(int64(len(rows)))
		m.CommitGroups.Add(1)
	}
	// Counted before the fan-out: a client that saw a row sees it counted.
	r.received.Add(int64(len(batch)))
	s.deliver(frames, rows, first, first+int64(len(rows)))
	return nil
}

// offsetText renders an offset for a message, null as "null".
func offsetText(v int64) string {
	if v == wire.Null {
		return "null"
	}
	return itoa(v)
}

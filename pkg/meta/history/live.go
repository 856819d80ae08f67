package history

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/streamcast/streamcast/internal/waitfor"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/wire"
)

// Bounds of a Live's reconnect backoff, and how many times in a row it
// re-pins and resubscribes after a 4416, with nothing newly published,
// before it gives up.
const (
	liveMinBackoff    = 100 * time.Millisecond
	liveMaxBackoff    = 10 * time.Second
	liveCatchUpRounds = 3
)

// Live holds a stream's live tail in memory above its published base, for
// a view that stays current (`sql --follow`): one subscription from the
// base's end reads every new row, and each Pin re-pins the base to what is
// published and drops the rows it now covers. The rows held never exceed
// MaxTail; a tail that outgrows it (publishing stalled) ends the Live,
// and every Pin after says so, so no answer is ever read from part of the
// history.
type Live struct {
	opts   Options // the base's: no fixed point
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	rows    []tailRow // offsets ascending, all at or above dropped
	next    int64     // the offset the subscription reads next
	dropped int64     // rows below it were dropped as published
	err     error     // why the subscription stopped; nil while it runs
}

// OpenLive pins the stream's published base once and subscribes to
// opts.Broker at its end. opts names no fixed point; opts.MaxTail bounds
// the rows held. Close ends the subscription.
func OpenLive(ctx context.Context, opts Options) (*Live, error) {
	switch {
	case opts.Broker == "":
		return nil, errors.New("history: a live tail reads new rows from a running server; give its ws://host:port/STREAM URL (--broker)")
	case opts.AsOfOffset != nil || opts.AsOfTS != nil:
		return nil, errors.New("a live view reads up to the newest row; leave out --as-of-offset and --as-of-ts")
	}
	if opts.MaxTail == 0 {
		opts.MaxTail = DefaultMaxTail
	}
	end, err := publishedEnd(ctx, opts)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	l := &Live{opts: opts, cancel: cancel, done: make(chan struct{}), next: end, dropped: end}
	go l.run(runCtx)
	return l, nil
}

// publishedEnd is where the published tables end now.
func publishedEnd(ctx context.Context, opts Options) (int64, error) {
	r, err := Open(ctx, opts)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	_, end := r.Extent()
	return end, nil
}

// Pin re-pins the published base, drops the tail rows it now covers, and
// returns a Reader of the base with the rest of the tail above it: one cut
// holding every row below its Extent's end. It returns the error that
// ended the subscription, if one did.
func (l *Live) Pin(ctx context.Context) (*Reader, error) {
	for try := 1; ; try++ {
		r, err := Open(ctx, l.opts)
		if err != nil {
			return nil, err
		}
		_, end := r.Extent()
		l.mu.Lock()
		if l.err != nil {
			err := l.err
			l.mu.Unlock()
			r.Close()
			return nil, err
		}
		if end < l.dropped {
			// The subscription re-pinned (after a reconnect) between
			// this Open and now and dropped rows this base lacks: pin
			// again, publishing only moves forward. Tables that went
			// back (a restore) cannot be joined to the tail.
			dropped := l.dropped
			l.mu.Unlock()
			r.Close()
			if try < 3 {
				continue
			}
			return nil, fmt.Errorf("stream %q: the published tables end at offset %d, below %d where they ended before (restored?), so the live tail no longer joins them; run the view again", r.md.Stream, end, dropped)
		}
		l.dropLocked(end)
		tail := l.rows[:len(l.rows):len(l.rows)] // appends go elsewhere
		l.mu.Unlock()
		if err := r.withTail(tail); err != nil {
			r.Close()
			return nil, err
		}
		return r, nil
	}
}

// Close ends the subscription and waits for it.
func (l *Live) Close() error {
	l.cancel()
	<-l.done
	return nil
}

// dropLocked drops the rows below end (the published tables hold them),
// copying the rest so their memory goes too.
func (l *Live) dropLocked(end int64) {
	if end <= l.dropped {
		return
	}
	i, _ := slices.BinarySearchFunc(l.rows, end, func(t tailRow, o int64) int {
		switch {
		case t.offset < o:
			return -1
		case t.offset > o:
			return 1
		}
		return 0
	})
	if i > 0 {
		l.rows = append([]tailRow(nil), l.rows[i:]...)
	}
	l.dropped = end
	l.next = max(l.next, end)
}

// withTail puts rows (ascending, starting where the base ends) above the
// base as its live log's rows past the published end.
func (r *Reader) withTail(rows []tailRow) error {
	if len(rows) == 0 {
		return nil
	}
	n := len(r.parts)
	if n == 0 || r.parts[n-1].lg.State != meta.Live {
		return fmt.Errorf("stream %q has no live log to hold rows %d to %d from the server (it was retired or is migrating); run the query again", r.md.Stream, rows[0].offset, rows[len(rows)-1].offset)
	}
	if rows[0].offset != r.end {
		return fmt.Errorf("stream %q: the published tables end at offset %d but the rows held from the server start at %d, so rows between are in neither; run the query again", r.md.Stream, r.end, rows[0].offset)
	}
	last := r.parts[n-1]
	last.tail = rows
	last.end = rows[len(rows)-1].offset + 1
	r.end = last.end
	return nil
}

// run is the subscription's goroutine, owned by the Live: Close stops it
// and waits.
func (l *Live) run(ctx context.Context) {
	defer close(l.done)
	err := l.follow(ctx)
	if err == nil || ctx.Err() != nil {
		err = errors.New("history: the live tail was closed")
	}
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

// follow subscribes at the tail's end and reads into it. A dropped
// connection, a server going away or a 4429 reconnect with backoff; a 4416
// too_old or evicted (the tail's end is further back than the server
// replays) re-pins the base, whose tables hold those rows or soon will,
// and subscribes where they end, as `tail --catch-up` does. Each reconnect
// re-pins the base first, so the tail restarts as small as it can.
func (l *Live) follow(ctx context.Context) error {
	wait := liveMinBackoff
	rounds := 0
	for {
		l.mu.Lock()
		from := l.next
		l.mu.Unlock()
		sub, err := wire.Subscribe(ctx, l.opts.Broker, wire.SubscribeOptions{DialOptions: l.opts.Dial, Offset: wire.At(from)})
		if err == nil {
			rounds, wait = 0, liveMinBackoff
			err = l.read(ctx, sub)
			sub.Close()
		}
		if ctx.Err() != nil {
			return nil
		}
		var nr *wire.NotReplayable
		switch {
		case errors.As(err, &nr) && (nr.Why == wire.WhyTooOld || nr.Why == wire.WhyEvicted):
			if rounds++; rounds > liveCatchUpRounds {
				return fmt.Errorf("the live tail gave up after %d rounds: the published tables end at offset %d, but the server refuses to replay from there, so newer rows are in neither yet; raise the stream's max_replay or publish more often, then run the view again: %w",
					liveCatchUpRounds, from, nr)
			}
		case !liveRetryable(err):
			return fmt.Errorf("the live tail from %s stopped at offset %d: %w", l.opts.Broker, l.resume(), err)
		}
		if !waitfor.Sleep(ctx, wait) {
			return nil
		}
		wait = min(2*wait, liveMaxBackoff)
		moved, err := l.repin(ctx)
		if err != nil {
			return err
		}
		if moved {
			rounds = 0 // publishing advanced: the next refusal starts afresh
		}
	}
}

func (l *Live) resume() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// repin drops the tail rows the published tables now hold, and reports
// whether they end further on than before.
func (l *Live) repin(ctx context.Context) (moved bool, err error) {
	end, err := publishedEnd(ctx, l.opts)
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	moved = end > l.dropped
	l.dropLocked(end)
	l.mu.Unlock()
	return moved, nil
}

// read appends the subscription's rows to the tail until it ends. A tail
// at MaxTail re-pins once to drop what was published meanwhile; still
// full, publishing has stalled and the Live ends with a refusal.
func (l *Live) read(ctx context.Context, sub *wire.Subscription) error {
	for {
		m, err := sub.Recv(ctx)
		if err != nil {
			return err
		}
		l.mu.Lock()
		if m.Offset < l.next {
			l.mu.Unlock()
			continue // the tables hold it already, or it came twice
		}
		full := int64(len(l.rows)) >= l.opts.MaxTail
		l.mu.Unlock()
		if full {
			if _, err := l.repin(ctx); err != nil {
				return err
			}
			l.mu.Lock()
			held, at := int64(len(l.rows)), l.dropped
			l.mu.Unlock()
			if held >= l.opts.MaxTail {
				return &Refusal{Why: WhyMaxTail, Msg: fmt.Sprintf("the live tail holds %d rows past the published end (offsets %d on), --max-tail %d: publishing is behind, so the view stops rather than answer from part of the history; raise --max-tail or publish more often",
					held, at, l.opts.MaxTail)}
			}
		}
		l.mu.Lock()
		if m.Offset >= l.next {
			l.rows = append(l.rows, tailRow{offset: m.Offset, ts: m.TS, row: slices.Clone(m.Row)})
			l.next = m.Offset + 1
		}
		l.mu.Unlock()
	}
}

// liveRetryable reports whether the subscription reconnects after err:
// as any following client does (wire.Retryable), except that the
// history's own refusals are final.
func liveRetryable(err error) bool {
	var rf *Refusal
	return !errors.As(err, &rf) && wire.Retryable(err)
}

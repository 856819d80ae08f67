package txbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamcast/streamcast/internal/waitfor"
	"github.com/streamcast/streamcast/pkg/wire"
)

// item is one received row, copied out of the subscription's buffer.
type item struct {
	offset int64
	ts     int64 // wire.Null when the log predates stamps
	row    []byte
	args   []any // the row's column values, for a table sink
}

// sink is where a receiver puts rows: the inbox table, or the table of
// `streamcast tail --into`. insert runs in the transaction that moves the
// subscriber's offset past the rows.
type sink interface {
	// prepare copies m out of the subscription's buffer; an error is a row
	// this sink cannot store, which ends the receiver.
	prepare(m *wire.Message) (item, error)
	insert(ctx context.Context, tx *sql.Tx, items []item) error
}

// receiver subscribes to a stream and lands its rows exactly once: each
// batch commits with the subscriber's new last offset, rows at or below the
// stored one are skipped, and every (re)connect starts one above it. With a
// window it closes its subscription at high water and reconnects at low
// water. The receiver's goroutine is owned by the Inbox or Land that
// started it, which stops it through ctx and waits on done.
type receiver struct {
	db         *sql.DB
	d          Dialect
	url        string
	subscriber string
	dial       wire.DialOptions
	land       sink
	window     *Window // nil: never pauses (a table sink)
	onPause    func(paused bool)
	notice     func(msg string, keyvals ...any)
	batchRows  int
	pollEvery  time.Duration
	minBackoff time.Duration
	maxBackoff time.Duration
	stopAt     int64 // stop once every offset below it has landed; wire.Null: never

	// A table sink (Land) lets saved state win over a start offset
	// instead of refusing it, and may be told to move its state (reset).
	savedWins bool
	reset     *int64 // subscribe here (wire.Null: live) whatever the state holds
	saved     int64  // the state's last offset found by open; wire.Null: none

	streamID string // bound at the first connect; checked at every later one

	paused atomic.Bool
	held   Held // what the inbox holds as far as this receiver knows; its goroutine only
	landed atomic.Int64
	last   atomic.Int64 // the last offset landed (or stored at start)

	wake chan struct{} // rows landed (cap 1)
	poke chan struct{} // rows processed: a paused receiver recounts (cap 1)
	done chan struct{}

	mu  sync.Mutex
	err error // why the receiver stopped; nil while it runs or after a clean stop
}

// errDone ends a receiver that landed everything up to stopAt.
var errDone = errors.New("txbox: caught up")

// errPaused ends a subscription closed at high water.
var errPaused = errors.New("txbox: paused")

func (r *receiver) init() {
	r.wake = make(chan struct{}, 1)
	r.poke = make(chan struct{}, 1)
	r.done = make(chan struct{})
	if r.notice == nil {
		r.notice = func(string, ...any) {}
	}
}

func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// fail records why the receiver stopped and wakes a waiting Next.
func (r *receiver) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
	notify(r.wake)
}

func (r *receiver) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// open makes the first connection: it reads the subscriber's state,
// subscribes one above its last offset (or at offset, or live, for a new
// subscriber), and binds or checks the stream's identity. Nothing is
// received before the identity is checked.
func (r *receiver) open(ctx context.Context, offset *int64) (*wire.Subscription, error) {
	st, err := loadState(ctx, r.db, r.d, r.subscriber)
	if err != nil {
		return nil, err
	}
	if st.found && offset != nil && !r.savedWins {
		return nil, &OffsetGiven{Subscriber: r.subscriber, Last: st.last, Asked: *offset}
	}
	r.saved = wire.Null
	if st.found {
		r.saved = st.last
	}
	so := wire.SubscribeOptions{DialOptions: r.dial}
	switch {
	case r.reset != nil:
		if *r.reset != wire.Null {
			so.Offset = wire.At(*r.reset)
		}
	case st.found:
		so.Offset = wire.At(st.last + 1)
	case offset != nil:
		so.Offset = wire.At(*offset)
	}
	sub, err := wire.Subscribe(ctx, r.url, so)
	if err != nil {
		return nil, fmt.Errorf("txbox: subscriber %q: %w", r.subscriber, err)
	}
	g := sub.Greeting()
	if err := checkGreeting(g, r.url); err != nil {
		sub.Close()
		return nil, err
	}
	if !st.found {
		// The offset before the first row this subscription delivers:
		// the replay's start, or the frontier for a live start.
		if err := bindState(ctx, r.db, r.d, r.subscriber, g.StreamID, sub.Resume()-1); err != nil {
			sub.Close()
			return nil, err
		}
		if st, err = loadState(ctx, r.db, r.d, r.subscriber); err != nil {
			sub.Close()
			return nil, err
		}
	}
	if st.streamID != g.StreamID {
		sub.Close()
		return nil, &StreamMismatch{Table: InboxStateTable, Key: r.subscriber, Stored: st.streamID, Got: g.StreamID}
	}
	r.streamID = st.streamID
	r.last.Store(st.last)
	return sub, nil
}

// reconnect subscribes one above the stored last offset and checks the
// stream's identity.
func (r *receiver) reconnect(ctx context.Context) (*wire.Subscription, error) {
	st, err := loadState(ctx, r.db, r.d, r.subscriber)
	if err != nil {
		return nil, &dbError{err}
	}
	if !st.found {
		return nil, stateError(StateGone, r.subscriber, nil, fmt.Sprintf("the %s row of subscriber %q is gone", InboxStateTable, r.subscriber), "; it was deleted while the inbox ran, so there is no offset to resume at: restart the inbox to start it over")
	}
	sub, err := wire.Subscribe(ctx, r.url, wire.SubscribeOptions{DialOptions: r.dial, Offset: wire.At(st.last + 1)})
	if err != nil {
		return nil, err
	}
	if g := sub.Greeting(); g.StreamID != r.streamID {
		sub.Close()
		return nil, &StreamMismatch{Table: InboxStateTable, Key: r.subscriber, Stored: r.streamID, Got: g.StreamID}
	}
	r.last.Store(st.last)
	return sub, nil
}

// count reads what the inbox holds for this subscriber, processed rows of
// other workers and processes included.
func (r *receiver) count(ctx context.Context) (Held, error) {
	var h Held
	if err := r.db.QueryRowContext(ctx, heldQuery(r.d), r.subscriber).Scan(&h.Rows, &h.Bytes); err != nil {
		return h, &dbError{fmt.Errorf("txbox: count the rows of subscriber %q in %s: %w", r.subscriber, InboxTable, err)}
	}
	return h, nil
}

// setPaused stores the new state before telling the callback, so the
// callback reads the state it is told.
func (r *receiver) setPaused(p bool) {
	r.paused.Store(p)
	if r.onPause != nil {
		r.onPause(p)
	}
}

// run is the receiver's goroutine. sub is the connection open made, or nil
// when the inbox starts paused.
func (r *receiver) run(ctx context.Context, sub *wire.Subscription) {
	defer close(r.done)
	backoff := r.minBackoff
	tick := time.NewTicker(r.pollEvery)
	defer tick.Stop()
	for {
		if ctx.Err() != nil {
			if sub != nil {
				sub.Close()
			}
			return
		}
		if r.paused.Load() {
			select {
			case <-ctx.Done():
				continue
			case <-r.poke:
			case <-tick.C:
			}
			h, err := r.count(ctx)
			if err != nil {
				if ctx.Err() == nil {
					r.fail(err)
				}
				return
			}
			r.held = h
			if !r.window.Next(true, h) {
				r.setPaused(false)
			}
			continue
		}
		if sub == nil {
			var err error
			sub, err = r.reconnect(ctx)
			if err != nil {
				if ctx.Err() != nil {
					continue
				}
				if !transient(err) {
					r.fail(fmt.Errorf("txbox: subscriber %q: %w", r.subscriber, err))
					return
				}
				r.notice("inbox reconnect failed; retrying", "subscriber", r.subscriber, "in", backoff, "err", err)
				if !waitfor.Sleep(ctx, backoff) {
					continue
				}
				backoff = min(2*backoff, r.maxBackoff)
				continue
			}
			if r.window != nil {
				h, err := r.count(ctx)
				if err != nil {
					sub.Close()
					sub = nil
					if ctx.Err() == nil {
						r.fail(err)
					}
					return
				}
				r.held = h
			}
		}
		got, err := r.receive(ctx, sub)
		sub.Close()
		sub = nil
		if got > 0 {
			backoff = r.minBackoff
		}
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, errPaused):
		case errors.Is(err, errDone):
			r.fail(errDone)
			return
		case !transient(err):
			r.fail(fmt.Errorf("txbox: subscriber %q: %w", r.subscriber, err))
			return
		default:
			// A connection that ends while receiving is not a pause:
			// reconnect at once (with backoff), paused stays false.
			r.notice("inbox connection ended; reconnecting", "subscriber", r.subscriber, "at", r.last.Load()+1, "in", backoff, "err", err)
			if !waitfor.Sleep(ctx, backoff) {
				continue
			}
			backoff = min(2*backoff, r.maxBackoff)
		}
	}
}

// receive lands the rows of one subscription in batches until it ends,
// the window fills (errPaused), or stopAt is reached (errDone). It returns
// how many rows it landed.
func (r *receiver) receive(ctx context.Context, sub *wire.Subscription) (int64, error) {
	if r.stopAt != wire.Null && r.last.Load() >= r.stopAt-1 {
		return 0, errDone
	}
	items := make(chan item, r.batchRows)
	readErr := make(chan error, 1)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			m, err := sub.Recv(ctx)
			if err == nil {
				var it item
				if it, err = r.land.prepare(m); err != nil {
					err = &landError{err}
				} else {
					select {
					case items <- it:
						continue
					case <-quit:
						return
					}
				}
			}
			readErr <- err
			return
		}
	}()
	defer func() {
		close(quit)
		sub.Close() // ends a Recv the reader is blocked in
		wg.Wait()
	}()

	var (
		landed int64
		batch  []item
		ended  error
	)
	for {
		batch = batch[:0]
		var size int64
		take := func(it item) {
			batch = append(batch, it)
			size += int64(len(it.row))
		}
		if ended == nil {
			select {
			case it := <-items:
				take(it)
			case ended = <-readErr:
			case <-ctx.Done():
				return landed, ctx.Err()
			}
		}
		// Take what has already arrived, up to a batch, and stop at the row
		// that fills the window: it is the last one taken.
	fill:
		for len(batch) < r.batchRows {
			if r.window != nil && len(batch) > 0 && r.window.Full(Held{Rows: r.held.Rows + int64(len(batch)), Bytes: r.held.Bytes + size}) {
				break
			}
			select {
			case it := <-items:
				take(it)
			default:
				break fill
			}
		}
		if len(batch) == 0 {
			if errors.Is(ended, io.EOF) {
				ended = fmt.Errorf("the server ended the subscription at offset %d: %w", r.last.Load()+1, ended)
			}
			return landed, ended
		}
		n, err := r.commit(ctx, batch)
		if err != nil {
			return landed, err
		}
		landed += n
		r.held.Rows += int64(len(batch))
		r.held.Bytes += size
		notify(r.wake)
		if r.stopAt != wire.Null && r.last.Load() >= r.stopAt-1 {
			return landed, errDone
		}
		if r.window != nil && r.window.Full(r.held) {
			// The count is an upper bound (rows processed since are not
			// subtracted); recount before closing the subscription.
			h, err := r.count(ctx)
			if err != nil {
				return landed, err
			}
			r.held = h
			if r.window.Next(false, h) {
				r.setPaused(true)
				return landed, errPaused
			}
		}
	}
}

// commit lands batch and moves the subscriber's last offset past it, in
// one transaction. Rows at or below the stored offset (landed by another
// receiver of the same subscriber) are skipped. It returns how many rows it
// landed.
func (r *receiver) commit(ctx context.Context, batch []item) (int64, error) {
	n, err := r.commitTx(ctx, batch)
	if err != nil {
		var sm *StreamMismatch
		if !errors.As(err, &sm) {
			err = &dbError{err}
		}
	}
	return n, err
}

func (r *receiver) commitTx(ctx context.Context, batch []item) (int64, error) {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("txbox: begin landing %d rows: %w", len(batch), err)
	}
	defer tx.Rollback()
	// A write first: it takes the write lock (SQLite) or the row lock
	// (PostgreSQL) before the offset is read, so two receivers of one
	// subscriber serialize instead of both landing the same rows.
	if _, err := tx.ExecContext(ctx, r.d.Rebind("UPDATE "+InboxStateTable+" SET last_offset = last_offset WHERE subscriber = ?"), r.subscriber); err != nil {
		return 0, stateError(StateWrite, r.subscriber, err, fmt.Sprintf("lock the %s row of subscriber %q", InboxStateTable, r.subscriber), "")
	}
	st, err := loadState(ctx, tx, r.d, r.subscriber)
	if err != nil {
		return 0, err
	}
	if !st.found {
		return 0, stateError(StateGone, r.subscriber, nil, fmt.Sprintf("the %s row of subscriber %q is gone", InboxStateTable, r.subscriber), "; it was deleted while the inbox ran: restart the inbox to start it over")
	}
	if st.streamID != r.streamID {
		return 0, &StreamMismatch{Table: InboxStateTable, Key: r.subscriber, Stored: st.streamID, Got: r.streamID}
	}
	fresh := batch
	for len(fresh) > 0 && fresh[0].offset <= st.last {
		fresh = fresh[1:]
	}
	if len(fresh) == 0 {
		r.last.Store(st.last)
		return 0, nil
	}
	if err := r.land.insert(ctx, tx, fresh); err != nil {
		return 0, err
	}
	last := fresh[len(fresh)-1].offset
	if _, err := tx.ExecContext(ctx, r.d.Rebind("UPDATE "+InboxStateTable+" SET last_offset = ? WHERE subscriber = ?"), last, r.subscriber); err != nil {
		return 0, stateError(StateWrite, r.subscriber, err, fmt.Sprintf("move subscriber %q to offset %d", r.subscriber, last), "")
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("txbox: commit %d rows up to offset %d: %w", len(fresh), last, err)
	}
	r.last.Store(last)
	r.landed.Add(int64(len(fresh)))
	return int64(len(fresh)), nil
}

// transient reports whether the receiver retries after err: the server
// going away or dropping a slow reader, the network failing, the database
// busy. Refusals, protocol errors, identity mismatches, rows the sink
// cannot store and other database errors end it.
func transient(err error) bool {
	var (
		ga *wire.GoingAway
		ts *wire.TooSlow
		ce *wire.CloseError
		pe *wire.ProtocolError
		re wire.Refusal
		sm *StreamMismatch
		og *OffsetGiven
		de *dbError
		le *landError
	)
	switch {
	case errors.As(err, &de):
		msg := de.Error()
		return strings.Contains(msg, "database is locked") || strings.Contains(msg, "SQLITE_BUSY") ||
			strings.Contains(msg, "SQLSTATE 40001") || strings.Contains(msg, "SQLSTATE 40P01")
	case errors.As(err, &le), errors.As(err, &sm), errors.As(err, &og), errors.As(err, &pe), errors.As(err, &re):
		return false
	case errors.As(err, &ga), errors.As(err, &ts), errors.As(err, &ce):
		return true
	case errors.Is(err, io.EOF):
		return true // a clean close (1000) mid-stream: resume where it ended
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return true // a network error: dial failure, reset, timeout
}

// dbError marks an error of the application's database (see transient);
// landError a row the sink cannot store.
type dbError struct{ err error }

func (e *dbError) Error() string { return e.err.Error() }
func (e *dbError) Unwrap() error { return e.err }

type landError struct{ err error }

func (e *landError) Error() string { return e.err.Error() }
func (e *landError) Unwrap() error { return e.err }

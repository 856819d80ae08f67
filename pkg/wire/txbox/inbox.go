package txbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/streamcast/streamcast/pkg/wire"
)

// Defaults of InboxOptions and LandOptions (the backoff is the outbox's,
// DefaultMinBackoff and DefaultMaxBackoff).
const (
	DefaultInboxBatchRows = 500
	DefaultInboxPollEvery = time.Second
)

// InboxOptions configure an Inbox. The zero value works: a new subscriber
// starts at the stream's frontier, the window holds DefaultMaxBytes, and
// the tables are created when missing.
type InboxOptions struct {
	wire.DialOptions

	// Offset is where a new subscriber starts (inclusive; 0 is the
	// earliest row). nil starts at the stream's frontier. A subscriber
	// with state resumes one above the last offset it received and
	// refuses an Offset (*OffsetGiven).
	Offset *int64

	// Window bounds what the inbox holds unprocessed (MaxBytes, MaxRows,
	// ResumeAt): at high water the receiver closes its subscription and
	// the inbox is paused; strictly below ResumeAt of every bound it
	// reconnects one above the last offset it received.
	Window

	// OnPauseChange, when set, is called with the starting state before
	// NewInbox returns and then on every transition, in order, never with
	// an unchanged value; Close reports nothing. It runs on the receiver's
	// goroutine, which waits for it: keep it quick (set a flag, update a
	// gauge).
	OnPauseChange func(paused bool)

	// CatchUp would read a gap the server no longer serves from the
	// published tables. It is refused for now (ErrCatchUpUnavailable).
	CatchUp bool

	// NoCreate leaves the tables alone: for a role without DDL rights,
	// which has them made from DDL once.
	NoCreate bool

	// Notice hears what a person should know while the inbox runs
	// (reconnects); nil discards. charmbracelet/log's Warn fits.
	Notice func(msg string, keyvals ...any)

	// BatchRows is the most rows landed in one transaction (0:
	// DefaultInboxBatchRows). PollEvery is how often Next looks for rows
	// landed by another process and a paused inbox recounts (0:
	// DefaultInboxPollEvery). MinBackoff and MaxBackoff bound the wait
	// between reconnects.
	BatchRows              int
	PollEvery              time.Duration
	MinBackoff, MaxBackoff time.Duration
}

func (o *InboxOptions) validate() error {
	if o.CatchUp {
		return ErrCatchUpUnavailable
	}
	if err := o.Window.Validate(); err != nil {
		return fmt.Errorf("txbox: inbox window: %w", err)
	}
	switch {
	case o.Offset != nil && *o.Offset < 0:
		return fmt.Errorf("txbox: Offset %d is negative; give 0 (the earliest row) or more", *o.Offset)
	case o.BatchRows < 0, o.PollEvery < 0, o.MinBackoff < 0, o.MaxBackoff < 0:
		return errors.New("txbox: BatchRows, PollEvery, MinBackoff and MaxBackoff take 0 (the default) or a positive value")
	}
	if o.PollEvery == 0 {
		o.PollEvery = DefaultInboxPollEvery
	}
	receiveDefaults(&o.BatchRows, &o.MinBackoff, &o.MaxBackoff)
	return nil
}

// receiveDefaults fills the receiver settings InboxOptions and LandOptions
// share where they are left zero.
func receiveDefaults(batchRows *int, minBackoff, maxBackoff *time.Duration) {
	if *batchRows == 0 {
		*batchRows = DefaultInboxBatchRows
	}
	if *minBackoff == 0 {
		*minBackoff = DefaultMinBackoff
	}
	if *maxBackoff == 0 {
		*maxBackoff = max(DefaultMaxBackoff, *minBackoff)
	}
}

// Message is one received row as Next hands it out.
type Message struct {
	Offset int64           // the row's offset in the stream
	TS     int64           // the server's commit stamp, µs since the epoch; wire.Null when the log predates stamps
	Row    json.RawMessage // the row's JSON object, as the server sent it
}

// Time returns TS as a time (the zero time when TS is wire.Null).
func (m *Message) Time() time.Time { return (&wire.Message{TS: m.TS}).Time() }

// Unmarshal decodes the row into v with encoding/json.
func (m *Message) Unmarshal(v any) error {
	if err := json.Unmarshal(m.Row, v); err != nil {
		return fmt.Errorf("txbox: row at offset %d: %w", m.Offset, err)
	}
	return nil
}

// Inbox receives a stream into the application's database exactly once.
// A receiver goroutine lands rows in InboxTable, moving the subscriber's
// last offset in the same transaction; Next hands them out oldest first,
// each with a transaction that already deletes it. The application does
// its work in that transaction and commits, so the work and the row's
// removal happen together or not at all.
//
// Next is for one goroutine at a time; Paused and Close may be called from
// any. Several Inboxes (in one process or many) may share a subscriber id:
// they share its rows, and each row is handed out once.
type Inbox struct {
	db         *sql.DB
	d          Dialect
	subscriber string
	pollEvery  time.Duration
	recv       *receiver
	cancel     context.CancelFunc

	mu   sync.Mutex // serializes Next, Commit and Close
	open *sql.Tx    // the transaction of the last Next, until it ends

	closeOnce sync.Once
}

// NewInbox opens the inbox of subscriber on the stream at url: it creates
// the tables unless NoCreate, connects, binds the stream's identity at the
// subscriber's first connect or checks it (*StreamMismatch), decides from
// what the inbox holds whether it starts paused (then it closes the
// subscription before returning), tells OnPauseChange, and starts the
// receiver. Close stops the receiver; the caller owns calling it.
func NewInbox(ctx context.Context, db *sql.DB, d Dialect, url, subscriber string, opts InboxOptions) (*Inbox, error) {
	if err := d.valid(); err != nil {
		return nil, err
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if subscriber == "" || strings.TrimSpace(subscriber) != subscriber {
		return nil, fmt.Errorf("txbox: subscriber id %q is empty or has surrounding spaces; give a stable name, e.g. \"billing\"", subscriber)
	}
	if !opts.NoCreate {
		if err := CreateTables(ctx, db, d); err != nil {
			return nil, err
		}
	}
	w := opts.Window
	r := &receiver{
		db: db, d: d, url: url, subscriber: subscriber, dial: opts.DialOptions,
		land: newInboxLanding(d, subscriber), window: &w, onPause: opts.OnPauseChange, notice: opts.Notice,
		batchRows: opts.BatchRows, pollEvery: opts.PollEvery, minBackoff: opts.MinBackoff, maxBackoff: opts.MaxBackoff,
		stopAt: wire.Null,
	}
	r.init()
	sub, err := r.open(ctx, opts.Offset)
	if err != nil {
		return nil, err
	}
	// Counted after the connect, so rows processed meanwhile are seen.
	h, err := r.count(ctx)
	if err != nil {
		sub.Close()
		return nil, err
	}
	r.held = h
	paused := w.Start(h)
	if paused {
		sub.Close()
		sub = nil
	}
	r.setPaused(paused)
	rctx, cancel := context.WithCancel(context.Background())
	in := &Inbox{db: db, d: d, subscriber: subscriber, pollEvery: opts.PollEvery, recv: r, cancel: cancel}
	go r.run(rctx, sub)
	return in, nil
}

// Paused reports whether the inbox is held at its window's bound, with its
// subscription closed.
func (in *Inbox) Paused() bool { return in.recv.paused.Load() }

// Next returns the oldest unprocessed row and a transaction that already
// deletes it. Do the row's work in tx and commit it; a transaction left
// open is committed by the next Next (or Commit), and rolled back by Close.
// Next waits for a row until ctx ends. Once the receiver has stopped on an
// error (a refusal, a recreated stream), Next returns the rows already
// received and then that error.
func (in *Inbox) Next(ctx context.Context) (*Message, *sql.Tx, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.commitOpen(); err != nil {
		return nil, nil, err
	}
	tick := time.NewTicker(in.pollEvery)
	defer tick.Stop()
	take := takeQuery(in.d)
	for {
		tx, err := in.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("txbox: begin taking a row of subscriber %q: %w", in.subscriber, err)
		}
		var (
			m  Message
			ts sql.NullInt64
			rw string
		)
		err = tx.QueryRowContext(ctx, take, in.subscriber, in.subscriber).Scan(&m.Offset, &ts, &rw)
		if err == nil {
			m.TS = wire.Null
			if ts.Valid {
				m.TS = ts.Int64
			}
			m.Row = json.RawMessage(rw)
			in.open = tx
			return &m, tx, nil
		}
		tx.Rollback()
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, nil, fmt.Errorf("txbox: take a row of subscriber %q from %s: %w", in.subscriber, InboxTable, err)
		}
		if err := in.recv.failure(); err != nil {
			if errors.Is(err, errClosed) {
				return nil, nil, ErrInboxClosed
			}
			return nil, nil, err
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-in.recv.wake:
		case <-tick.C: // rows another process's receiver landed
		}
	}
}

// Commit ends the transaction of the last Next now, if the caller left it
// open.
func (in *Inbox) Commit() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.commitOpen()
}

func (in *Inbox) commitOpen() error {
	tx := in.open
	if tx == nil {
		return nil
	}
	in.open = nil
	err := tx.Commit()
	switch {
	case errors.Is(err, sql.ErrTxDone):
		// The caller ended it; a rollback leaves the row for the next
		// Next, and either way this inbox may hold less now.
	case err != nil:
		tx.Rollback()
		return fmt.Errorf("txbox: commit the transaction of the last row: %w; the row stays in %s and is handed out again", err, InboxTable)
	}
	notify(in.recv.poke) // a paused receiver recounts
	return nil
}

// ErrInboxClosed is Next's error after Close.
var ErrInboxClosed = errors.New("txbox: the inbox is closed")

var errClosed = errors.New("txbox: closed")

// Close stops the receiver and waits for it, and rolls back a transaction
// of Next the caller left open (its row is handed out again). The rows
// already received stay in InboxTable for the next run.
func (in *Inbox) Close() error {
	in.closeOnce.Do(func() {
		in.cancel()
		<-in.recv.done
		in.recv.fail(errClosed)
		in.mu.Lock()
		defer in.mu.Unlock()
		if in.open != nil {
			in.open.Rollback()
			in.open = nil
		}
	})
	return nil
}

// inboxLanding puts rows in InboxTable.
type inboxLanding struct{ ins *rowInserter }

func newInboxLanding(d Dialect, subscriber string) *inboxLanding {
	return &inboxLanding{ins: newRowInserter(d, InboxTable, []string{"subscriber", "stream_offset", "ts", "row"}, func(dst []any, it item) []any {
		return append(dst, subscriber, it.offset, nullTS(it.ts), string(it.row))
	})}
}

func (l *inboxLanding) prepare(m *wire.Message) (item, error) {
	return item{offset: m.Offset, ts: m.TS, row: append([]byte(nil), m.Row...)}, nil
}

func (l *inboxLanding) insert(ctx context.Context, tx *sql.Tx, items []item) error {
	return l.ins.insert(ctx, tx, items)
}

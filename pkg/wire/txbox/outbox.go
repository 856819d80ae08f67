package txbox

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/streamcast/streamcast/pkg/wire"
)

// Defaults of OutboxOptions, in one place.
const (
	DefaultBatchRows    = 100
	DefaultPollEvery    = 100 * time.Millisecond
	DefaultMinBackoff   = 100 * time.Millisecond
	DefaultMaxBackoff   = 5 * time.Second
	DefaultLandedWindow = 1 << 16
	// DefaultMaxFrameBytes is the broker's default limits.max_message_bytes.
	DefaultMaxFrameBytes = 1 << 20
)

// OutboxOptions configure NewOutbox. The zero value is usable.
type OutboxOptions struct {
	wire.DialOptions

	// CreateTables runs DDL at NewOutbox. Leave it false for a role without
	// DDL rights and run DDL's statements once yourself.
	CreateTables bool
	// MaxInFlight is how many frames may await their reply; 0 means
	// wire.DefaultMaxInFlight.
	MaxInFlight int
	// BatchRows is the most rows sent in one frame; 0 means DefaultBatchRows.
	BatchRows int
	// MaxFrameBytes bounds a frame's size: match the broker's
	// limits.max_message_bytes. A batch is cut short to stay under it, and
	// a row that alone is larger goes to the dead letters unsent. 0 means
	// DefaultMaxFrameBytes.
	MaxFrameBytes int
	// PollEvery is how often the sender looks for rows committed by another
	// process (or by a transaction it was not told about); 0 means
	// DefaultPollEvery. Send wakes the sender at once.
	PollEvery time.Duration
	// MinBackoff and MaxBackoff bound the wait between attempts while the
	// broker or the database is unreachable; 0 means DefaultMinBackoff and
	// DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// LandedWindow is how many recent seqs Landed remembers; 0 means
	// DefaultLandedWindow.
	LandedWindow int
	// Logger receives the outage and recovery lines; nil means slog.Default().
	Logger *slog.Logger
	// OnDeadLetter is called, from the sender goroutine, after a row the
	// stream's schema refused was moved to DeadLetterTable. Keep it quick:
	// the rows behind it wait for it.
	OnDeadLetter func(DeadLetter)

	testAttempt   func(n int)              // tests: called with each failed attempt's count
	testSubmitted func(first int64, n int) // tests: called with each frame sent
}

// DeadLetter is a row the stream refused, moved out of the outbox.
type DeadLetter struct {
	Publisher string
	Seq       int64  // the seq Send returned for it
	Row       []byte // the row as sent
	Reason    string // the broker's refusal
}

// AcknowledgedRowsLost is the sender's refusal to go on when the broker's
// mark for this publisher is below what the broker already acknowledged to
// this outbox: the broker lost rows it had confirmed (a restore from an
// older copy, or a revive), and the outbox deleted them as landed, so it
// cannot send them again.
type AcknowledgedRowsLost struct {
	Publisher string
	Mark      int64 // the broker's last seq for the publisher, from the greeting
	Acked     int64 // the last seq the broker acknowledged to this outbox
}

func (e *AcknowledgedRowsLost) Error() string {
	return fmt.Sprintf("txbox: the broker's mark for publisher %q is seq %d, below seq %d, which it had acknowledged: "+
		"rows %d to %d were confirmed and are gone from the broker, and the outbox no longer holds them; "+
		"restore the broker's data, or accept the loss by setting acked_seq to %d in %s for this publisher",
		e.Publisher, e.Mark, e.Acked, e.Mark+1, e.Acked, e.Mark, OutboxStateTable)
}

// StoreBehindBroker is the sender's refusal to go on when the broker's mark
// for this publisher is ahead of every seq the outbox ever assigned: the
// application's database is older than the broker (restored from a backup),
// or another writer published under this id. Sending would number new rows
// with seqs the broker already holds, and it would drop them as duplicates.
type StoreBehindBroker struct {
	Publisher string
	Mark      int64 // the broker's last seq for the publisher, from the greeting
	Last      int64 // the last seq the outbox assigned (in wire numbering)
}

func (e *StoreBehindBroker) Error() string {
	return fmt.Sprintf("txbox: the broker's mark for publisher %q is seq %d, ahead of seq %d, the last this outbox assigned: "+
		"the database is behind the broker (restored from an older copy, or another process published under this id); "+
		"use a new publisher id for this database, or restore the database that sent seqs up to %d",
		e.Publisher, e.Mark, e.Last, e.Mark)
}

// Outbox queues rows in the caller's transactions and ships the committed
// ones to a stream as an exactly-once publisher. Its methods are safe for
// concurrent use.
type Outbox struct {
	db   *sql.DB
	d    Dialect
	url  string
	id   string
	opts OutboxOptions
	q    outboxQueries
	log  *slog.Logger

	wake   chan struct{} // a Send or Flush asks the sender to look now (buffered 1)
	cancel context.CancelFunc
	done   chan struct{} // closed when the sender goroutine has returned

	mu      sync.Mutex
	settled int64         // every seq up to here landed or went to the dead letters
	changed chan struct{} // closed and replaced when settled or err moves
	err     error         // what stopped the sender for good
	landed  []landing     // ring indexed by seq % len: recent seqs and their offsets
	// singleUntil makes the sender send rows one per frame up to this seq:
	// a batch was refused, and only a one-row frame says which row it was.
	singleUntil int64
}

type landing struct{ seq, offset int64 }

// outboxQueries are the statements, rebound once for the dialect.
type outboxQueries struct {
	nextSeq, insertOne, first, load, count, countUpTo   string
	lastSeq                                             string
	readState, bind, deleteLanded, setAcked, deadInsert string
	deadDelete, deadCount, isDead, initSeq, initState   string
}

func newOutboxQueries(d Dialect) outboxQueries {
	r := d.Rebind
	return outboxQueries{
		nextSeq:      r("UPDATE " + OutboxSeqTable + " SET last_seq = last_seq + ? WHERE publisher = ? RETURNING last_seq"),
		insertOne:    r("INSERT INTO " + OutboxTable + " (publisher, seq, row) VALUES (?, ?, ?)"),
		first:        r("SELECT seq FROM " + OutboxTable + " WHERE publisher = ? ORDER BY seq LIMIT 1"),
		load:         r("SELECT seq, row FROM " + OutboxTable + " WHERE publisher = ? AND seq >= ? ORDER BY seq LIMIT ?"),
		count:        r("SELECT COUNT(*) FROM " + OutboxTable + " WHERE publisher = ?"),
		countUpTo:    r("SELECT COUNT(*) FROM " + OutboxTable + " WHERE publisher = ? AND seq <= ?"),
		lastSeq:      r("SELECT last_seq FROM " + OutboxSeqTable + " WHERE publisher = ?"),
		readState:    r("SELECT stream_id, acked_seq, dead FROM " + OutboxStateTable + " WHERE publisher = ?"),
		bind:         r("UPDATE " + OutboxStateTable + " SET stream_id = ? WHERE publisher = ?"),
		deleteLanded: r("DELETE FROM " + OutboxTable + " WHERE publisher = ? AND seq <= ?"),
		setAcked:     r("UPDATE " + OutboxStateTable + " SET acked_seq = ? WHERE publisher = ? AND acked_seq < ?"),
		deadInsert:   r("INSERT INTO " + DeadLetterTable + " (publisher, seq, row, reason) VALUES (?, ?, ?, ?)"),
		deadDelete:   r("DELETE FROM " + OutboxTable + " WHERE publisher = ? AND seq = ?"),
		deadCount:    r("UPDATE " + OutboxStateTable + " SET dead = dead + 1 WHERE publisher = ?"),
		isDead:       r("SELECT COUNT(*) FROM " + DeadLetterTable + " WHERE publisher = ? AND seq = ?"),
		initSeq:      r("INSERT INTO " + OutboxSeqTable + " (publisher, last_seq) VALUES (?, 0) ON CONFLICT (publisher) DO NOTHING"),
		initState:    r("INSERT INTO " + OutboxStateTable + " (publisher) VALUES (?) ON CONFLICT (publisher) DO NOTHING"),
	}
}

// NewOutbox opens the outbox of publisherID in db and starts its sender,
// which publishes to the stream at url (ws://host/stream) once rows are
// committed. The stream must be declared exactly_once. Close stops the
// sender; the caller owns that call.
func NewOutbox(db *sql.DB, d Dialect, url, publisherID string, opts OutboxOptions) (*Outbox, error) {
	if err := d.valid(); err != nil {
		return nil, err
	}
	if publisherID == "" || len(publisherID) > wire.MaxPublisherBytes {
		return nil, fmt.Errorf("txbox: publisher id %q is %d bytes; give 1 to %d bytes, stable across restarts", publisherID, len(publisherID), wire.MaxPublisherBytes)
	}
	if opts.BatchRows <= 0 {
		opts.BatchRows = DefaultBatchRows
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = wire.DefaultMaxInFlight
	}
	if opts.PollEvery <= 0 {
		opts.PollEvery = DefaultPollEvery
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	if opts.MaxFrameBytes <= 0 {
		opts.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if opts.LandedWindow <= 0 {
		opts.LandedWindow = DefaultLandedWindow
	}
	o := &Outbox{
		db: db, d: d, url: url, id: publisherID, opts: opts,
		q:       newOutboxQueries(d),
		log:     opts.Logger,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		changed: make(chan struct{}),
		landed:  make([]landing, opts.LandedWindow),
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	ctx := context.Background()
	if opts.CreateTables {
		if err := CreateTables(ctx, db, d); err != nil {
			return nil, err
		}
	}
	if err := o.init(ctx); err != nil {
		return nil, err
	}
	ctx, o.cancel = context.WithCancel(ctx)
	go o.run(ctx)
	return o, nil
}

// init makes the publisher's rows in the seq and state tables, which Send
// and the sender update in place.
func (o *Outbox) init(ctx context.Context) error {
	for _, q := range []string{o.q.initSeq, o.q.initState} {
		if _, err := o.db.ExecContext(ctx, q, o.id); err != nil {
			return fmt.Errorf("txbox: open the outbox of publisher %q: %w; are the tables there? (txbox.DDL, or OutboxOptions.CreateTables)", o.id, err)
		}
	}
	var last int64
	if err := o.db.QueryRowContext(ctx, o.q.lastSeq, o.id).Scan(&last); err != nil {
		return fmt.Errorf("txbox: read the outbox of publisher %q: %w", o.id, err)
	}
	return nil
}

// Send queues row, a JSON object, in tx and returns its seq. The row is
// shipped once tx commits; if tx rolls back, its seq is given back. Seqs of
// one publisher are gapless and follow commit order, because Send holds the
// publisher's seq row locked until tx ends: concurrent producers should use
// distinct publisher ids.
func (o *Outbox) Send(ctx context.Context, tx *sql.Tx, row []byte) (int64, error) {
	return o.SendMany(ctx, tx, [][]byte{row})
}

// SendMany is Send of several rows, which take consecutive seqs; it returns
// the first. No rows is an error.
func (o *Outbox) SendMany(ctx context.Context, tx *sql.Tx, rows [][]byte) (int64, error) {
	if len(rows) == 0 {
		return 0, errors.New("txbox: SendMany of no rows; give at least one")
	}
	for i, r := range rows {
		if err := checkRow(r); err != nil {
			return 0, fmt.Errorf("txbox: row %d of %d: %w", i+1, len(rows), err)
		}
	}
	var last int64
	if err := tx.QueryRowContext(ctx, o.q.nextSeq, len(rows), o.id).Scan(&last); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("txbox: publisher %q has no row in %s; NewOutbox makes it, so open the outbox before sending", o.id, OutboxSeqTable)
		}
		return 0, fmt.Errorf("txbox: take a seq for publisher %q: %w", o.id, err)
	}
	first := last - int64(len(rows)) + 1
	if err := o.insert(ctx, tx, first, rows); err != nil {
		return 0, err
	}
	o.nudge()
	return first, nil
}

// insertChunk bounds the rows of one INSERT (3 parameters each), well under
// SQLite's and PostgreSQL's parameter limits.
const insertChunk = 200

func (o *Outbox) insert(ctx context.Context, tx *sql.Tx, first int64, rows [][]byte) error {
	if len(rows) == 1 {
		if _, err := tx.ExecContext(ctx, o.q.insertOne, o.id, first, string(rows[0])); err != nil {
			return fmt.Errorf("txbox: queue seq %d: %w", first, err)
		}
		return nil
	}
	for start := 0; start < len(rows); start += insertChunk {
		chunk := rows[start:min(start+insertChunk, len(rows))]
		var b strings.Builder
		b.WriteString("INSERT INTO " + OutboxTable + " (publisher, seq, row) VALUES ")
		args := make([]any, 0, 3*len(chunk))
		for i, r := range chunk {
			if i > 0 {
				b.WriteByte(',')
			}
			n := len(args)
			fmt.Fprintf(&b, "(%s,%s,%s)", o.d.Placeholder(n+1), o.d.Placeholder(n+2), o.d.Placeholder(n+3))
			args = append(args, o.id, first+int64(start+i), string(r))
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("txbox: queue seqs %d to %d: %w", first+int64(start), first+int64(start+len(chunk))-1, err)
		}
	}
	return nil
}

// checkRow refuses what no stream takes, before it is queued: a row is one
// JSON object.
func checkRow(r []byte) error {
	t := bytes.TrimLeft(r, " \t\r\n")
	if len(t) == 0 || t[0] != '{' || !json.Valid(r) {
		return fmt.Errorf("not a JSON object: %.40q; a row is one JSON object", r)
	}
	return nil
}

// nudge wakes the sender without blocking.
func (o *Outbox) nudge() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Landed returns the offset the broker gave seq, while this outbox still
// remembers it (the last LandedWindow seqs it saw acknowledged); ok is false
// otherwise, and for a row that went to the dead letters.
func (o *Outbox) Landed(seq int64) (offset int64, ok bool) {
	if seq <= 0 {
		return wire.Null, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.landed[seq%int64(len(o.landed))]
	if l.seq != seq {
		return wire.Null, false
	}
	return l.offset, true
}

// Flush waits until every row committed before the call has landed (or
// gone to the dead letters). It returns the error that stopped the sender,
// if one did, and ctx's error when ctx ends first.
func (o *Outbox) Flush(ctx context.Context) error {
	var target int64
	if err := o.db.QueryRowContext(ctx, o.q.lastSeq, o.id).Scan(&target); err != nil {
		return fmt.Errorf("txbox: flush publisher %q: read the last seq: %w", o.id, err)
	}
	o.nudge()
	poll := time.NewTicker(o.opts.PollEvery)
	defer poll.Stop()
	for {
		o.mu.Lock()
		settled, err, changed := o.settled, o.err, o.changed
		o.mu.Unlock()
		if err != nil {
			return err
		}
		if settled >= target {
			return nil
		}
		// Rows this process never saw may have landed too: sent by an
		// earlier process, or by another sender of the same id.
		var left int64
		if err := o.db.QueryRowContext(ctx, o.q.countUpTo, o.id, target).Scan(&left); err != nil {
			return fmt.Errorf("txbox: flush publisher %q: %w", o.id, err)
		}
		if left == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-poll.C:
		case <-o.done:
			o.mu.Lock()
			err := o.err
			o.mu.Unlock()
			if err == nil {
				err = fmt.Errorf("txbox: flush publisher %q: the outbox was closed with %d rows up to seq %d still pending", o.id, left, target)
			}
			return err
		case <-ctx.Done():
			return fmt.Errorf("txbox: flush publisher %q: %d rows up to seq %d have not landed yet: %w", o.id, left, target, ctx.Err())
		}
	}
}

// Pending reports how many committed rows wait in the outbox.
func (o *Outbox) Pending(ctx context.Context) (int64, error) {
	var n int64
	if err := o.db.QueryRowContext(ctx, o.q.count, o.id).Scan(&n); err != nil {
		return 0, fmt.Errorf("txbox: count the pending rows of publisher %q: %w", o.id, err)
	}
	return n, nil
}

// Done is closed when the sender has stopped: after Close, or on its own on
// an error retrying cannot fix (Err says which).
func (o *Outbox) Done() <-chan struct{} { return o.done }

// Err returns the error that stopped the sender for good (*StreamMismatch,
// *AcknowledgedRowsLost, *StoreBehindBroker, *wire.ExactlyOnceUnavailable,
// *wire.StreamRetired, …), or nil while it runs or after a plain Close.
func (o *Outbox) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Close stops the sender and waits for it, without draining: committed
// rows stay in the outbox for the next sender (Flush first to drain). It
// returns Err.
func (o *Outbox) Close() error {
	o.cancel()
	<-o.done
	return o.Err()
}

// fail records the error that stops the sender.
func (o *Outbox) fail(err error) {
	o.mu.Lock()
	if o.err == nil {
		o.err = err
	}
	close(o.changed)
	o.changed = make(chan struct{})
	o.mu.Unlock()
}

// settle records that every seq up to s landed or went to the dead letters,
// with the offsets of seqs first, first+1, … (Null entries unknown).
func (o *Outbox) settle(s, first int64, offsets []int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := int64(len(o.landed))
	for i, off := range offsets {
		if off != wire.Null {
			seq := first + int64(i)
			o.landed[seq%n] = landing{seq: seq, offset: off}
		}
	}
	if s > o.settled {
		o.settled = s
		close(o.changed)
		o.changed = make(chan struct{})
	}
}

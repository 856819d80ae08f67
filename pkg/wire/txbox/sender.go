package txbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/streamcast/streamcast/pkg/wire"
)

// The sender.
//
// One goroutine per Outbox (run) owns every publisher connection: it
// connects only when the outbox holds rows, reconciles with the greeting's
// mark, then pipelines ordered batches while a second goroutine (collect,
// owned by the session that starts it) settles their replies in order.
//
// Numbering. Send gives each row a seq; the broker numbers an exactly-once
// publisher's rows from its mark + 1 with no gaps. A row the schema refuses
// takes no broker seq, so every row behind it goes out one lower. The state
// table counts those rows (dead), and a row's wire seq is its seq minus
// dead: every row still in the outbox sits above every dead-lettered one,
// because a row is dead-lettered only when everything before it landed.

// errResend ends a session so the next one starts at the broker's mark:
// after a refused frame the connection's own numbering has moved past rows
// the broker never took.
var errResend = errors.New("txbox: resend from the broker's mark")

// run is the sender goroutine. It returns when ctx ends or on an error
// retrying cannot fix.
func (o *Outbox) run(ctx context.Context) {
	defer close(o.done)
	var out outage
	wait := o.opts.PollEvery
	for {
		has, err := o.hasRows(ctx)
		if err == nil && !has {
			woken, ok := o.sleep(ctx, wait)
			if !ok {
				return
			}
			// A Send wakes the sender before its transaction commits: look
			// again soon, then less and less often.
			if woken {
				wait = time.Millisecond
			} else {
				wait = min(2*wait, o.opts.PollEvery)
			}
			continue
		}
		wait = o.opts.PollEvery
		if err == nil {
			err = o.session(ctx, &out)
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errResend) {
			continue
		}
		if permanent(err) {
			o.log.Error("txbox: the outbox sender stopped; rows stay queued", "publisher", o.id, "err", err)
			o.fail(err)
			return
		}
		if _, ok := o.sleep(ctx, out.failed(o, err)); !ok {
			return
		}
	}
}

// permanent reports an error no retry can fix: the sender stops and says so.
func permanent(err error) bool {
	var (
		mismatch *StreamMismatch
		lost     *AcknowledgedRowsLost
		behind   *StoreBehindBroker
		eo       *wire.ExactlyOnceUnavailable
		retired  *wire.StreamRetired
		bad      *wire.BadRequest
	)
	return errors.As(err, &mismatch) || errors.As(err, &lost) || errors.As(err, &behind) ||
		errors.As(err, &eo) || errors.As(err, &retired) || errors.As(err, &bad)
}

// outage reports a run of failed attempts once, when it starts, and once
// when it ends, however many retries lie between.
type outage struct {
	since    time.Time
	attempts int
	backoff  time.Duration
}

// failed counts one failed attempt and returns how long to wait.
func (u *outage) failed(o *Outbox, err error) time.Duration {
	if u.attempts == 0 {
		u.since = time.Now()
		u.backoff = o.opts.MinBackoff
		o.log.Warn("txbox: the outbox cannot reach the stream; rows stay queued and the sender retries with backoff",
			"publisher", o.id, "url", o.url, "err", err, "max_backoff", o.opts.MaxBackoff)
	} else {
		u.backoff = min(2*u.backoff, o.opts.MaxBackoff)
	}
	u.attempts++
	if o.opts.testAttempt != nil {
		o.opts.testAttempt(u.attempts)
	}
	return u.backoff
}

// recovered ends the outage, if one was running.
func (u *outage) recovered(o *Outbox) {
	if u.attempts == 0 {
		return
	}
	o.log.Info("txbox: the outbox reached the stream again", "publisher", o.id,
		"failed_attempts", u.attempts, "outage", time.Since(u.since).Round(time.Millisecond))
	*u = outage{}
}

// sleep waits d, a nudge, or ctx's end; woken says a nudge came, ok false
// that ctx ended.
func (o *Outbox) sleep(ctx context.Context, d time.Duration) (woken, ok bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-o.wake:
		return true, true
	case <-t.C:
		return false, true
	case <-ctx.Done():
		return false, false
	}
}

func (o *Outbox) hasRows(ctx context.Context) (bool, error) {
	var seq int64
	err := o.db.QueryRowContext(ctx, o.q.first, o.id).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("txbox: look for rows to send: %w", err)
	}
	return true, nil
}

// sent is one frame awaiting its reply.
type sent struct {
	first int64    // seq of its first row
	rows  [][]byte // kept for the dead letters
	ack   *wire.Ack
}

func (s *sent) last() int64 { return s.first + int64(len(s.rows)) - 1 }

// session is one publisher connection: greeting, reconciliation, then
// batches until an error ends it.
func (o *Outbox) session(ctx context.Context, out *outage) error {
	p, err := wire.Publish(ctx, o.url, wire.PublishOptions{
		DialOptions: o.opts.DialOptions,
		Publisher:   o.id,
		MaxInFlight: o.opts.MaxInFlight,
	})
	if err != nil {
		return err
	}
	defer func() {
		// Close without waiting for owed replies: what they would have
		// said, the next greeting's mark says.
		cctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = p.CloseContext(cctx)
	}()
	next, dead, err := o.reconcile(ctx, p.Greeting())
	if err != nil {
		return err
	}
	out.recovered(o)

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	frames := make(chan sent, o.opts.MaxInFlight)
	collected := make(chan error, 1)
	go func() {
		err := o.collect(sctx, frames, dead)
		cancel() // unblock the submitter below
		collected <- err
	}()
	err = o.submit(sctx, p, frames, next)
	close(frames)
	cerr := <-collected
	if cerr != nil && !errors.Is(cerr, context.Canceled) {
		return cerr
	}
	var big *oversize
	if errors.As(err, &big) {
		// Everything before the row landed (the collector settled every
		// frame without an error), so it can go to the dead letters.
		return o.refuse(ctx, big.seq, big.row, big.Error())
	}
	if err == nil || errors.Is(err, context.Canceled) {
		return cerr
	}
	return err
}

// submit sends the outbox's rows from seq next in order, batched, until ctx
// ends or a send fails.
func (o *Outbox) submit(ctx context.Context, p *wire.Publisher, frames chan<- sent, next int64) error {
	limit := o.opts.BatchRows * 8
	wait := time.Duration(0)
	for {
		seqs, rows, err := o.load(ctx, next, limit)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			if wait == 0 {
				wait = time.Millisecond
			}
			woken, ok := o.sleep(ctx, wait)
			if !ok {
				return ctx.Err()
			}
			if woken {
				wait = time.Millisecond
			} else {
				wait = min(2*wait, o.opts.PollEvery)
			}
			continue
		}
		wait = 0
		if seqs[0] != next {
			return fmt.Errorf("txbox: the outbox of publisher %q holds seq %d where seq %d was expected next; rows were removed by hand?", o.id, seqs[0], next)
		}
		o.mu.Lock()
		single := o.singleUntil
		o.mu.Unlock()
		for i := 0; i < len(rows); {
			n := o.frameRows(rows[i:], seqs[i] <= single)
			if n == 0 {
				return &oversize{seq: seqs[i], row: rows[i], max: o.opts.MaxFrameBytes}
			}
			batch := rows[i : i+n]
			a, err := p.SubmitBatch(ctx, batch)
			if err != nil {
				return err
			}
			if o.opts.testSubmitted != nil {
				o.opts.testSubmitted(seqs[i], n)
			}
			select {
			case frames <- sent{first: seqs[i], rows: batch, ack: a}:
			case <-ctx.Done():
				return ctx.Err()
			}
			i += n
		}
		next = seqs[len(seqs)-1] + 1
	}
}

// frameOverhead bounds the bytes of a frame beyond its rows: the seq, the
// brackets and the commas.
const frameOverhead = 32

// frameRows is how many of rows go into the next frame: up to BatchRows
// (one when single), within MaxFrameBytes. 0 means the first row alone is
// too big to send.
func (o *Outbox) frameRows(rows [][]byte, single bool) int {
	limit := o.opts.BatchRows
	if single {
		limit = 1
	}
	size := frameOverhead
	n := 0
	for n < min(limit, len(rows)) {
		size += len(rows[n]) + 1
		if size > o.opts.MaxFrameBytes {
			break
		}
		n++
	}
	return n
}

// oversize is a row larger than a frame may be.
type oversize struct {
	seq int64
	row []byte
	max int
}

func (e *oversize) Error() string {
	return fmt.Sprintf("the row is %d bytes, more than a frame of at most %d bytes holds (OutboxOptions.MaxFrameBytes, the broker's limits.max_message_bytes)", len(e.row), e.max)
}

// load reads up to limit rows from seq next on, stopping before any gap.
func (o *Outbox) load(ctx context.Context, next int64, limit int) ([]int64, [][]byte, error) {
	rs, err := o.db.QueryContext(ctx, o.q.load, o.id, next, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("txbox: read the outbox from seq %d: %w", next, err)
	}
	defer rs.Close()
	var seqs []int64
	var rows [][]byte
	for rs.Next() {
		var seq int64
		var row []byte
		if err := rs.Scan(&seq, &row); err != nil {
			return nil, nil, fmt.Errorf("txbox: read the outbox from seq %d: %w", next, err)
		}
		if len(seqs) > 0 && seq != seqs[len(seqs)-1]+1 {
			break
		}
		seqs, rows = append(seqs, seq), append(rows, row)
	}
	if err := rs.Err(); err != nil {
		return nil, nil, fmt.Errorf("txbox: read the outbox from seq %d: %w", next, err)
	}
	return seqs, rows, nil
}

// collect settles replies in send order: landed rows are deleted (in one
// transaction per run of replies already in), a refused one-row frame goes
// to the dead letters, and anything else ends the session.
func (o *Outbox) collect(ctx context.Context, frames <-chan sent, dead int64) error {
	var carry *sent
	for {
		var f sent
		if carry != nil {
			f, carry = *carry, nil
		} else {
			var ok bool
			select {
			case f, ok = <-frames:
				if !ok {
					return nil
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		offs, err := f.ack.Wait(ctx)
		if err != nil {
			return o.refused(ctx, f, err)
		}
		lastSeq, first, all := f.last(), f.first, offs
		closed := false
	drain:
		for {
			select {
			case g, ok := <-frames:
				if !ok {
					closed = true
					break drain
				}
				select {
				case <-g.ack.Done():
				default:
					carry = &g
					break drain
				}
				goffs, gerr := g.ack.Wait(ctx)
				if gerr != nil {
					carry = &g
					break drain
				}
				lastSeq, all = g.last(), append(all, goffs...)
			default:
				break drain
			}
		}
		if err := o.land(ctx, lastSeq, dead); err != nil {
			return err
		}
		o.settle(lastSeq, first, all)
		if closed {
			return nil
		}
	}
}

// land deletes the rows up to seq, which the broker acknowledged, and moves
// the acknowledged mark, in one transaction.
func (o *Outbox) land(ctx context.Context, seq, dead int64) error {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("txbox: delete landed rows up to seq %d: %w", seq, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, o.q.deleteLanded, o.id, seq); err != nil {
		return fmt.Errorf("txbox: delete landed rows up to seq %d: %w", seq, err)
	}
	if _, err := tx.ExecContext(ctx, o.q.setAcked, seq-dead, o.id, seq-dead); err != nil {
		return fmt.Errorf("txbox: record seq %d as acknowledged: %w", seq, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("txbox: delete landed rows up to seq %d: %w", seq, err)
	}
	return nil
}

// refused handles a frame's error reply. A schema refusal of a batch makes
// the next session send those rows one per frame, so the refused row can
// be told apart; a refused single row goes to the dead letters.
func (o *Outbox) refused(ctx context.Context, f sent, err error) error {
	var rej *wire.Rejected
	if !errors.As(err, &rej) {
		return err
	}
	if len(f.rows) > 1 {
		o.mu.Lock()
		o.singleUntil = max(o.singleUntil, f.last())
		o.mu.Unlock()
		return errResend
	}
	return o.refuse(ctx, f.first, f.rows[0], rej.Detail)
}

// refuse moves row seq to the dead letters, reports it, and ends the
// session so the next one numbers the rows behind it from the mark.
func (o *Outbox) refuse(ctx context.Context, seq int64, row []byte, reason string) error {
	if err := o.deadLetter(ctx, seq, row, reason); err != nil {
		return err
	}
	o.settle(seq, seq, nil)
	o.log.Warn("txbox: the stream refused a row; it was moved to the dead letters and the rows after it go on in order",
		"publisher", o.id, "seq", seq, "table", DeadLetterTable, "reason", reason)
	if o.opts.OnDeadLetter != nil {
		o.opts.OnDeadLetter(DeadLetter{Publisher: o.id, Seq: seq, Row: row, Reason: reason})
	}
	return errResend
}

// deadLetter moves row seq to DeadLetterTable and counts it, in one
// transaction, so the wire numbering of the rows behind it moves with it.
func (o *Outbox) deadLetter(ctx context.Context, seq int64, row []byte, reason string) error {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("txbox: move refused seq %d to %s: %w", seq, DeadLetterTable, err)
	}
	defer tx.Rollback()
	for _, st := range []struct {
		q    string
		args []any
	}{
		{o.q.deadInsert, []any{o.id, seq, string(row), reason}},
		{o.q.deadDelete, []any{o.id, seq}},
		{o.q.deadCount, []any{o.id}},
	} {
		if _, err := tx.ExecContext(ctx, st.q, st.args...); err != nil {
			return fmt.Errorf("txbox: move refused seq %d to %s: %w", seq, DeadLetterTable, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("txbox: move refused seq %d to %s: %w", seq, DeadLetterTable, err)
	}
	return nil
}

// reconcile checks the greeting against the outbox's state and deletes the
// rows the broker already holds, unsent. It returns the seq to send next
// and the count of dead-lettered rows.
func (o *Outbox) reconcile(ctx context.Context, g *wire.Greeting) (next, dead int64, err error) {
	if g.Publisher == nil {
		return 0, 0, &wire.ProtocolError{Msg: "the greeting of an exactly-once publisher carries no publisher mark"}
	}
	mark := *g.Publisher
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("txbox: reconcile publisher %q: %w", o.id, err)
	}
	defer tx.Rollback()
	var stream string
	var acked, last int64
	if err := tx.QueryRowContext(ctx, o.q.readState, o.id).Scan(&stream, &acked, &dead); err != nil {
		return 0, 0, fmt.Errorf("txbox: reconcile publisher %q: read %s: %w", o.id, OutboxStateTable, err)
	}
	if err := tx.QueryRowContext(ctx, o.q.lastSeq, o.id).Scan(&last); err != nil {
		return 0, 0, fmt.Errorf("txbox: reconcile publisher %q: read %s: %w", o.id, OutboxSeqTable, err)
	}
	switch {
	case stream != "" && g.StreamID != "" && stream != g.StreamID:
		return 0, 0, &StreamMismatch{Table: OutboxStateTable, Key: o.id, Stored: stream, Got: g.StreamID}
	case stream == "" && g.StreamID != "":
		if _, err := tx.ExecContext(ctx, o.q.bind, g.StreamID, o.id); err != nil {
			return 0, 0, fmt.Errorf("txbox: reconcile publisher %q: bind stream id: %w", o.id, err)
		}
	}
	switch {
	case mark.LastSeq < acked:
		return 0, 0, &AcknowledgedRowsLost{Publisher: o.id, Mark: mark.LastSeq, Acked: acked}
	case mark.LastSeq > last-dead:
		return 0, 0, &StoreBehindBroker{Publisher: o.id, Mark: mark.LastSeq, Last: last - dead}
	}
	landed := mark.LastSeq + dead
	if _, err := tx.ExecContext(ctx, o.q.deleteLanded, o.id, landed); err != nil {
		return 0, 0, fmt.Errorf("txbox: reconcile publisher %q: delete landed rows: %w", o.id, err)
	}
	if _, err := tx.ExecContext(ctx, o.q.setAcked, mark.LastSeq, o.id, mark.LastSeq); err != nil {
		return 0, 0, fmt.Errorf("txbox: reconcile publisher %q: record the mark: %w", o.id, err)
	}
	// The mark's offset is that of the row with wire seq mark.LastSeq,
	// which is seq landed unless landed is itself a dead-lettered row (the
	// landed row then sits below it, numbered before the shift).
	offsets := []int64{mark.LastOffset}
	if dead > 0 {
		var n int
		if err := tx.QueryRowContext(ctx, o.q.isDead, o.id, landed).Scan(&n); err != nil {
			return 0, 0, fmt.Errorf("txbox: reconcile publisher %q: read %s: %w", o.id, DeadLetterTable, err)
		}
		if n > 0 {
			offsets = nil
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("txbox: reconcile publisher %q: %w", o.id, err)
	}
	o.settle(landed, landed, offsets)
	return landed + 1, dead, nil
}

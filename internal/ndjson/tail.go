package ndjson

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/streamcast/streamcast/internal/waitfor"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// Logger receives what Tail and Load tell a person while they run:
// reconnects, warnings. charmbracelet/log's *log.Logger satisfies it.
type Logger interface {
	Info(msg any, keyvals ...any)
	Warn(msg any, keyvals ...any)
}

type nopLogger struct{}

func (nopLogger) Info(any, ...any) {}
func (nopLogger) Warn(any, ...any) {}

// Defaults of TailOptions.
const (
	DefaultMinBackoff     = 100 * time.Millisecond
	DefaultMaxBackoff     = 10 * time.Second
	DefaultTailBatchBytes = 4 << 20
)

// TailOptions configure Tail. Start from DefaultTailOptions, which tails
// live from the frontier, printing whole frames, until the server closes or
// ctx ends; Validate refuses a value out of range rather than replacing it.
type TailOptions struct {
	wire.DialOptions

	// Offset is where a tail with no saved position starts, inclusive (0
	// is the earliest row); nil reads live from the frontier. A Cursor
	// that holds a position wins: the tail resumes one above it, and says
	// so once through Logger when Offset was given too. That makes one
	// command line safe to rerun forever (Kafka's auto.offset.reset).
	Offset *int64
	// Reset moves the Cursor's saved position, the one explicit way back
	// (or forward): the tail starts at *Reset (inclusive; 0 is the
	// earliest row, ResetLatest the frontier) whatever the cursor holds,
	// and the cursor is moved to the offset before it before any row is
	// written. It needs a Cursor, and wins over Offset.
	Reset *int64
	// Where is the server-side filter (a JSON object of column to value).
	Where json.RawMessage
	// Count stops the tail after this many rows; 0 is no limit.
	Count int64
	// UntilCaughtUp stops the tail once every row below the first
	// greeting's frontier has been written, at once when there is nothing
	// to replay. With Where, the rows are filtered here, with the same
	// predicate code the server runs, because only unfiltered offsets show
	// where the replay ends.
	UntilCaughtUp bool
	// Reconnect keeps the tail going across a 1001, a dropped connection
	// or a 4429: it reconnects with capped exponential backoff at the
	// offset after the last row received, logging each attempt. A first
	// connection that fails the same way (the server is down or
	// unreachable) is retried with the same backoff until ctx ends. A
	// refusal (no such stream, a bad request, an offset not served) is
	// final either way.
	Reconnect bool
	// Rows writes only each row's object instead of the whole
	// [offset,ts,row] frame.
	Rows bool
	// Cursor, when set, is advanced to the offset of each row once its line
	// has been written (and flushed), saved at most once a second and once
	// more when Tail returns.
	Cursor *Cursor
	// Logger hears about reconnects; nil discards.
	Logger Logger
	// MinBackoff and MaxBackoff bound the wait between reconnects.
	MinBackoff, MaxBackoff time.Duration
	// BatchBytes is how much output may wait for a slow writer before
	// reading stops.
	BatchBytes int
	// CatchUp, when set, reads what a 4416 too_old or evicted refusal
	// leaves out from the stream's published tables (and, for an Offset
	// of 0, everything they hold first), then subscribes where they end:
	// see catchUp. CatchUpRounds bounds the read-then-subscribe rounds.
	CatchUp       CatchUpFunc
	CatchUpRounds int
}

// DefaultTailOptions returns the options of `streamcast tail` without
// flags.
func DefaultTailOptions() TailOptions {
	return TailOptions{MinBackoff: DefaultMinBackoff, MaxBackoff: DefaultMaxBackoff, BatchBytes: DefaultTailBatchBytes, CatchUpRounds: DefaultCatchUpRounds}
}

// Validate checks the options, naming the flag of `streamcast tail` that
// sets a bad one and what it may be. It never changes o.
func (o *TailOptions) Validate() error {
	switch {
	case o.Offset != nil && *o.Offset < 0:
		return fmt.Errorf("--offset %d is negative; give 0 (earliest) or more", *o.Offset)
	case o.Reset != nil && *o.Reset < 0 && *o.Reset != ResetLatest:
		return fmt.Errorf("--reset-position %d is negative; give 0 (earliest) or more, or \"latest\"", *o.Reset)
	case len(o.Where) > 0 && (!bytes.HasPrefix(bytes.TrimSpace(o.Where), []byte("{")) || !json.Valid(o.Where)):
		return fmt.Errorf("--where %s is not a JSON object of column to value, e.g. '{\"side\":1}'", o.Where)
	case o.Count < 0:
		return fmt.Errorf("--count is %d; give 1 or more (0 is no limit)", o.Count)
	case o.MinBackoff <= 0:
		return fmt.Errorf("the least reconnect backoff is %v; give a positive duration", o.MinBackoff)
	case o.MaxBackoff < o.MinBackoff:
		return fmt.Errorf("the greatest reconnect backoff %v is below the least, %v; give one at least as long", o.MaxBackoff, o.MinBackoff)
	case o.BatchBytes < 1:
		return fmt.Errorf("the output batch is %d bytes; give 1 or more", o.BatchBytes)
	case o.CatchUp != nil && o.CatchUpRounds < 1:
		return fmt.Errorf("--catch-up-rounds is %d; give 1 or more", o.CatchUpRounds)
	}
	return nil
}

// ResetLatest is the TailOptions.Reset that moves a cursor to the
// stream's frontier: the tail reads live from there.
const ResetLatest = wire.Null

// TailResult says what a tail wrote.
type TailResult struct {
	Rows       int64 // lines written
	First      int64 // offset of the first row written; wire.Null when none
	Last       int64 // offset of the last row written; wire.Null when none
	Frontier   int64 // end_offset of the first greeting; wire.Null on a live-only stream
	Reconnects int   // reconnections made
}

// TailError is a tail that could not go on, worded for the command line:
// Msg says what happened and which flags to rerun with. Err is the cause
// (a *NotReplayable, *StreamNotFound, *TooSlow, …) for errors.As.
type TailError struct {
	Msg string
	Err error
}

// Error is Msg.
func (e *TailError) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *TailError) Unwrap() error { return e.Err }

// Tail subscribes to the stream at rawURL and writes one line per row to
// out: the frame [offset,ts,row] exactly as received, or with opts.Rows the
// row alone. Lines are written in batches of whatever has arrived, and each
// batch is one Write (followed by Flush when out has one) before the cursor
// moves past its rows.
//
// It returns nil when the server closes with 1000, when ctx ends (a clean
// stop: the cursor is saved), or when Count or UntilCaughtUp is satisfied. A
// refusal or a lost connection (without Reconnect) is a *TailError. A failed
// write to out is returned as is, wrapped.
func Tail(ctx context.Context, rawURL string, out io.Writer, opts TailOptions) (res TailResult, err error) {
	res = TailResult{First: wire.Null, Last: wire.Null, Frontier: wire.Null}
	if err := opts.Validate(); err != nil {
		return res, err
	}
	if opts.Reset != nil && opts.Cursor == nil {
		return res, errors.New("--reset-position moves the position saved by --cursor or --into; give one of them, or use --offset")
	}
	log := opts.Logger
	if log == nil {
		log = nopLogger{}
	}
	minB, maxB := opts.MinBackoff, opts.MaxBackoff

	next := wire.Null // where the next subscription starts; wire.Null = live
	src := ""         // where a refused offset came from, for the message
	switch {
	case opts.Reset != nil:
		next = *opts.Reset
		if next != ResetLatest {
			// Moved before anything is read: a run killed before its
			// first row still resumes where it was told to. Offset 0
			// is never a row, so a cursor of 0 means "none finished".
			if err := moveCursor(opts.Cursor, max(next-1, 0), next, log); err != nil {
				return res, err
			}
		}
	case opts.Cursor != nil && opts.Cursor.Resume() != wire.Null:
		next = opts.Cursor.Resume()
		src = " (one above --cursor " + opts.Cursor.Path() + ")"
		if opts.Offset != nil {
			log.Info(fmt.Sprintf("resuming after offset %d saved in %s; --offset applies only when no position is saved (move it with --reset-position)", next-1, opts.Cursor.Path()))
		}
	case opts.Offset != nil:
		next = *opts.Offset
	}
	clientFilter := opts.UntilCaughtUp && len(opts.Where) > 0
	advise := func(err error, resume int64) error {
		if werr := explainWhere(ctx, rawURL, opts.DialOptions, opts.Where, err); werr != nil {
			return werr
		}
		return tailError(err, resume, src, opts.Cursor != nil, opts.Reconnect)
	}

	w := newTailWriter(ctx, out, opts.Cursor, opts.BatchBytes)
	defer func() {
		if werr := w.finish(); werr != nil && err == nil {
			err = werr
		}
	}()

	var (
		filter  *schema.Filter
		target  = wire.Null // UntilCaughtUp: stop below this offset
		first   = true
		backoff = minB
		cu      catchUpState
	)
	if opts.CatchUp != nil && next == 0 {
		// Earliest asks for everything the tables still hold, which may
		// reach below what the server replays (older logs, a migration).
		done, err := cu.round(ctx, rawURL, &opts, w, &res, &next, nil)
		if done || err != nil {
			return res, err
		}
	}
	for {
		so := wire.SubscribeOptions{DialOptions: opts.DialOptions}
		if next != wire.Null {
			so.Offset = wire.At(next)
		}
		if !clientFilter {
			so.Where = opts.Where
		}
		sub, serr := wire.Subscribe(ctx, rawURL, so)
		if serr != nil {
			if ctx.Err() != nil {
				return res, nil
			}
			if nr, ok := catchable(serr); ok && opts.CatchUp != nil {
				done, err := cu.round(ctx, rawURL, &opts, w, &res, &next, nr)
				if done || err != nil {
					return res, err
				}
				continue
			}
			if !opts.Reconnect || !wire.Retryable(serr) {
				if first {
					return res, advise(serr, wire.Null)
				}
				return res, advise(serr, next)
			}
			// The first connection is retried like a reconnect: a user
			// who asked to reconnect expects the tail to wait for a
			// server that is down, not to give up before it starts.
			what := "reconnect failed; retrying"
			if first {
				what = "connect failed; retrying"
			}
			log.Warn(what, "in", backoff, "at", offsetText(next), "err", serr)
			if !waitfor.Sleep(ctx, backoff) {
				return res, nil
			}
			backoff = min(2*backoff, maxB)
			res.Reconnects++
			continue
		}
		g := sub.Greeting()
		cu.rounds, cu.wait = 0, 0 // the rounds bound one catch-up, not the tail's life
		if first {
			first = false
			res.Frontier = g.EndOffset
			if next == wire.Null && opts.Reset == nil && opts.Cursor != nil && opts.Cursor.bound() && sub.Resume() != wire.Null {
				// A live start is saved before any line: a rerun after a
				// kill must resend the lines OpenOutput cuts, and a
				// cursor with no offset would start live again, past them.
				opts.Cursor.Advance(sub.Resume() - 1)
				if err := opts.Cursor.Save(true); err != nil {
					sub.Close()
					return res, err
				}
			}
			if opts.Reset != nil && *opts.Reset == ResetLatest {
				if err := moveCursor(opts.Cursor, sub.Resume()-1, sub.Resume(), log); err != nil {
					sub.Close()
					return res, err
				}
			}
			if clientFilter {
				sch, cerr := sub.Schema()
				if cerr == nil && sch == nil {
					sch = schema.Any()
				}
				if cerr == nil {
					filter, cerr = sch.CompileFilter(opts.Where)
				}
				if cerr != nil {
					sub.Close()
					return res, &TailError{Msg: "--where " + string(opts.Where) + ": " + cerr.Error(), Err: cerr}
				}
				if filter.All() {
					filter = nil
				}
			}
			if opts.UntilCaughtUp {
				if g.Replay == nil || g.Replay.Start >= g.Replay.End {
					sub.Close()
					return res, nil
				}
				target = g.Replay.End
			}
		}

		received, rerr := tailOne(ctx, sub, w, &res, &opts, filter, target)
		resume := sub.Resume()
		sub.Close()
		if received > 0 {
			backoff = minB
		}
		switch {
		case rerr == nil || errors.Is(rerr, errTailDone) || errors.Is(rerr, io.EOF) || ctx.Err() != nil:
			return res, nil
		case errors.Is(rerr, errWriter):
			return res, w.failure()
		case !opts.Reconnect || !wire.Retryable(rerr):
			return res, advise(rerr, resume)
		}
		if resume == wire.Null && next != wire.Null {
			resume = next // a live-only stream has no offsets; never happens on a durable one
		}
		next = resume
		res.Reconnects++
		log.Info("reconnecting", "in", backoff, "at", offsetText(next), "reason", rerr)
		if !waitfor.Sleep(ctx, backoff) {
			return res, nil
		}
		backoff = min(2*backoff, maxB)
	}
}

// moveCursor moves c to last for --reset-position and says so.
func moveCursor(c *Cursor, last, from int64, log Logger) error {
	was := c.Last()
	if err := c.Move(last); err != nil {
		return err
	}
	start := "offset " + strconv.FormatInt(from, 10)
	if from == 0 {
		start = "the earliest row"
	}
	if was == wire.Null {
		log.Info(fmt.Sprintf("set the position saved in %s to offset %d; tailing from %s", c.Path(), last, start))
	} else {
		log.Info(fmt.Sprintf("moved the position saved in %s from offset %d to %d; tailing from %s", c.Path(), was, last, start))
	}
	return nil
}

// errTailDone ends a subscription loop that did what was asked.
var errTailDone = errors.New("tail: done")

// errWriter ends a subscription loop whose output failed.
var errWriter = errors.New("tail: output failed")

// tailOne reads one subscription until it ends or the tail is done, handing
// each row to w. It returns how many frames it received.
func tailOne(ctx context.Context, sub *wire.Subscription, w *tailWriter, res *TailResult, opts *TailOptions, filter *schema.Filter, target int64) (int64, error) {
	var received int64
	for {
		m, err := sub.Recv(ctx)
		if err != nil {
			return received, err
		}
		received++
		if target != wire.Null && m.Offset >= target {
			return received, errTailDone // past the frontier: not part of the catch-up
		}
		show := filter == nil || filter.MatchCanonical(m.Row)
		line := m.Frame()
		if opts.Rows {
			line = m.Row
		}
		if !show {
			line = nil
		}
		if !w.add(line, m.Offset, show) {
			return received, errWriter
		}
		if show {
			res.Rows++
			if res.First == wire.Null {
				res.First = m.Offset
			}
			res.Last = m.Offset
			if opts.Count > 0 && res.Rows >= opts.Count {
				return received, errTailDone
			}
		}
		if target != wire.Null && m.Offset >= target-1 {
			return received, errTailDone
		}
	}
}

// tailError words err for the command line: what happened, with the
// numbers, and the flags that get the tail going again. resume is the
// offset to rerun at to lose nothing (Null when unknown or live); src says
// where a refused start offset came from ("" when from --offset).
func tailError(err error, resume int64, src string, hasCursor, reconnect bool) error {
	again := func(at int64) string {
		if at == wire.Null {
			return "rerun the tail"
		}
		if hasCursor {
			// The cursor is saved on the way out, and --offset would
			// not apply to it.
			return "rerun with the same --cursor (it resumes at " + strconv.FormatInt(at, 10) + ")"
		}
		return "rerun with --offset " + strconv.FormatInt(at, 10)
	}
	var (
		nr *wire.NotReplayable
		ts *wire.TooSlow
		ga *wire.GoingAway
	)
	switch {
	case errors.As(err, &nr):
		flag := "--offset"
		if hasCursor {
			flag = "--reset-position" // a saved position wins over --offset
		}
		return &TailError{Msg: notReplayableAdvice(nr, src, flag), Err: err}
	case errors.As(err, &ts):
		if ts.Offset == wire.Null {
			return &TailError{Msg: "the server dropped this tail for falling behind" + behindText(ts.Behind) + "; the stream is live-only, so the rows it missed are gone; rerun the tail, and read faster (or filter with --where)", Err: err}
		}
		hint := "; pass --reconnect to resume automatically"
		if reconnect {
			hint = ""
		}
		return &TailError{Msg: "the server dropped this tail for falling behind" + behindText(ts.Behind) + "; " + again(ts.Offset) + " to lose nothing" + hint, Err: err}
	case errors.As(err, &ga):
		return &TailError{Msg: "the server closed the connection (it is shutting down); " + again(resume) + " to lose nothing, or pass --reconnect to resume automatically", Err: err}
	}
	var re wire.Refusal
	var pe *wire.ProtocolError
	var ad *wire.AccessDenied
	if errors.As(err, &re) || errors.As(err, &pe) || errors.As(err, &ad) || resume == wire.Null {
		return &TailError{Msg: err.Error(), Err: err}
	}
	return &TailError{Msg: fmt.Sprintf("%v; %s to lose nothing, or pass --reconnect to resume automatically", err, again(resume)), Err: err}
}

func behindText(n int64) string {
	if n == wire.Null {
		return ""
	}
	return " (" + strconv.FormatInt(n, 10) + " frames)"
}

// notReplayableAdvice words a 4416 with the flags that get past it; flag
// is the one that says where to start (--offset, or --reset-position for a
// tail with a cursor).
func notReplayableAdvice(e *wire.NotReplayable, from, flag string) string {
	asked := "offset " + offsetOrUnknown(e.Offset)
	if e.Offset == 0 {
		asked = "the earliest row"
	}
	// --catch-up reads the gap from the published tables (a tail that
	// has it and still got here was refused something no table fixes).
	const catchUp = "rerun with --catch-up to read the gap from the stream's published tables"
	switch e.Why {
	case wire.WhyTooOld:
		if e.EndOffset == wire.Null || e.MaxReplay == wire.Null {
			return fmt.Sprintf("%s%s is further behind the frontier than the stream's max_replay allows; rerun with a later %s, or %s", asked, from, flag, catchUp)
		}
		oldest := e.EndOffset - e.MaxReplay
		skipped := ""
		if e.Offset != wire.Null && e.Offset < oldest {
			skipped = fmt.Sprintf(" (rows %d to %d are skipped)", e.Offset, oldest-1)
		}
		return fmt.Sprintf("%s%s is more than max_replay=%d rows behind the frontier %d, so the server will not replay it; rerun with %s %d, the oldest offset it replays now%s, or %s", asked, from, e.MaxReplay, e.EndOffset, flag, oldest, skipped, catchUp)
	case wire.WhyEvicted:
		gone := ""
		if e.Offset != wire.Null && e.Earliest != wire.Null && e.Offset < e.Earliest {
			gone = fmt.Sprintf(" (rows %d to %d are no longer served)", e.Offset, e.Earliest-1)
		}
		return fmt.Sprintf("%s%s is below %s, the earliest offset this stream still serves; rerun with %s earliest to start there%s, or %s", asked, from, offsetOrUnknown(e.Earliest), flag, gone, catchUp)
	case wire.WhyAhead:
		return fmt.Sprintf("%[1]s%[2]s is past %[4]s, the next offset this stream will assign: it came from another server or one that was restored; rerun with %[3]s %[4]s to read from now, or %[3]s earliest", asked, from, flag, offsetOrUnknown(e.EndOffset))
	case wire.WhyNotDurable:
		return "this stream is live-only (it keeps no log), so it cannot replay from an offset; tail it without --offset and --cursor"
	case wire.WhyEmpty:
		return "this stream's log holds no rows any more, so there is nothing to replay; tail it without --offset to read live (with --cursor: --reset-position latest), or " + catchUp
	}
	return e.Error()
}

func offsetText(o int64) string {
	if o == wire.Null {
		return "live"
	}
	return strconv.FormatInt(o, 10)
}

// tailWriter moves lines from the reading goroutine to out in batches: the
// reader appends to one buffer while the writer goroutine writes the other,
// so each Write carries everything that arrived during the previous one,
// and nothing waits in a buffer while the reader blocks on the network. The
// cursor moves only after the Write (and Flush) that carried a row's line
// returned: a crash never leaves it past a row the output did not get.
type tailWriter struct {
	out    io.Writer
	flush  func() error // out's Flush, when it buffers
	cursor *Cursor
	limit  int

	mu       sync.Mutex // guards the fields below; notEmpty and notFull wait on it
	notEmpty sync.Cond  // the writer waits for work
	notFull  sync.Cond  // the reader waits while limit bytes are queued
	buf      []byte     // lines not yet handed to the writer
	last     int64      // offset of the last frame in buf (also one without a line); wire.Null
	pending  bool       // buf or last holds something to hand over
	done     bool       // the reader is finished: write what is left, then stop
	stopped  bool       // ctx ended: the reader must not wait for room
	err      error      // the first write or cursor failure; the reader stops

	spare  []byte // the writer's buffer, swapped with buf
	exited chan struct{}
	stop   func() bool

	// The saver writes a cursor position that a throttled save skipped,
	// once the throttle allows, so a quiet stream does not leave the file
	// behind what was written.
	saverStop chan struct{}
	saverDone chan struct{}
}

func newTailWriter(ctx context.Context, out io.Writer, cursor *Cursor, limit int) *tailWriter {
	w := &tailWriter{out: out, cursor: cursor, limit: limit, last: wire.Null, exited: make(chan struct{}),
		buf: make([]byte, 0, 64<<10), spare: make([]byte, 0, 64<<10)}
	if f, ok := out.(interface{ Flush() error }); ok {
		w.flush = f.Flush
	}
	w.notEmpty.L = &w.mu
	w.notFull.L = &w.mu
	w.stop = context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.stopped = true
		w.mu.Unlock()
		w.notFull.Broadcast()
	})
	go w.run()
	if cursor != nil {
		w.saverStop, w.saverDone = make(chan struct{}), make(chan struct{})
		go w.saver()
	}
	return w
}

func (w *tailWriter) saver() {
	defer close(w.saverDone)
	t := time.NewTicker(w.cursor.every)
	defer t.Stop()
	for {
		select {
		case <-w.saverStop:
			return
		case <-t.C:
			if err := w.cursor.Save(false); err != nil {
				w.fail(err)
				return
			}
		}
	}
}

// add queues line (when show) and records offset as finished with once the
// line is written. It reports false when the output has failed or ctx ended
// while waiting for room.
func (w *tailWriter) add(line []byte, offset int64, show bool) bool {
	w.mu.Lock()
	for len(w.buf) >= w.limit && w.err == nil && !w.stopped {
		w.notFull.Wait()
	}
	if w.err != nil || (w.stopped && len(w.buf) >= w.limit) {
		w.mu.Unlock()
		return false
	}
	wasIdle := !w.pending
	if show {
		w.buf = append(w.buf, line...)
		w.buf = append(w.buf, '\n')
	}
	if offset != wire.Null {
		w.last = offset
	}
	w.pending = true
	w.mu.Unlock()
	if wasIdle {
		w.notEmpty.Signal()
	}
	return true
}

func (w *tailWriter) run() {
	defer close(w.exited)
	for {
		w.mu.Lock()
		for !w.pending && !w.done {
			w.notEmpty.Wait()
		}
		if !w.pending {
			w.mu.Unlock()
			return
		}
		b, last := w.buf, w.last
		w.buf, w.last, w.pending = w.spare[:0], wire.Null, false
		w.mu.Unlock()
		w.notFull.Broadcast()

		err := w.write(b, last)
		w.spare = b[:0]
		if err != nil {
			w.fail(err)
			return
		}
	}
}

// fail records the first write or cursor failure and wakes a reader waiting
// for room, so it stops.
func (w *tailWriter) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
	w.notFull.Broadcast()
}

func (w *tailWriter) write(b []byte, last int64) error {
	if len(b) > 0 {
		if _, err := w.out.Write(b); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		if w.flush != nil {
			if err := w.flush(); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
		}
	}
	if last != wire.Null && w.cursor != nil {
		w.cursor.Advance(last)
		return w.cursor.Save(false)
	}
	return nil
}

// failure returns the error that stopped the writer.
func (w *tailWriter) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// finish writes what is queued, stops the writer and saves the cursor one
// last time. It returns the writer's failure, if any.
func (w *tailWriter) finish() error {
	w.stop()
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
	w.notEmpty.Signal()
	<-w.exited
	if w.saverStop != nil {
		close(w.saverStop)
		<-w.saverDone
	}
	err := w.failure()
	if w.cursor != nil {
		if serr := w.cursor.Save(true); serr != nil && err == nil {
			err = serr
		}
	}
	return err
}

// offsetOrUnknown renders an offset from a close reason for a sentence: "?"
// when the server left it out.
func offsetOrUnknown(o int64) string {
	if o == wire.Null {
		return "?"
	}
	return strconv.FormatInt(o, 10)
}

package ndjson

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/streamcast/streamcast/internal/waitfor"
	"github.com/streamcast/streamcast/pkg/wire"
)

// DefaultCatchUpRounds is how many read-then-subscribe rounds a catch-up
// makes before it gives up.
const DefaultCatchUpRounds = 3

// CatchUpFunc reads a stream's published rows from offset from (0: the
// first the tables still hold), in offset order, handing each to emit as
// the server would have sent it (its --where applied), with no socket
// open. g is the greeting of a throwaway connection: its metadata_hint,
// metadata and stream_id say where the tables are and whose they must be.
// It returns the offset the tables end at, where the tail subscribes next.
type CatchUpFunc func(ctx context.Context, g *wire.Greeting, from int64, emit func(offset, ts int64, row []byte) error) (next int64, err error)

// catchable returns the 4416 refusal a catch-up can get past: too_old and
// evicted, whose rows may still be in the published tables. not_durable,
// empty and ahead are a stream with no log, a log with nothing in it and
// an offset from the future: no table fixes those.
func catchable(err error) (*wire.NotReplayable, bool) {
	var nr *wire.NotReplayable
	if errors.As(err, &nr) && (nr.Why == wire.WhyTooOld || nr.Why == wire.WhyEvicted) {
		return nr, true
	}
	return nil, false
}

// catchUpState counts a tail's catch-up rounds.
type catchUpState struct {
	rounds int
	lastAt int64 // where the last round's tables ended
	wait   time.Duration
	line   []byte
}

// round reads the rows from *next on from the published tables and moves
// *next to where they end. refused is the refusal that asked for it (nil
// for an --offset earliest start). done is true when the tail is finished
// (Count reached); an error is worded for the command line.
func (c *catchUpState) round(ctx context.Context, rawURL string, opts *TailOptions, w *tailWriter, res *TailResult, next *int64, refused *wire.NotReplayable) (done bool, err error) {
	if c.rounds >= opts.CatchUpRounds {
		return false, c.exhausted(*next, refused, opts.CatchUpRounds)
	}
	if c.rounds > 0 && *next == c.lastAt {
		// The last round found nothing newly published: give publishing
		// time before reading the tables again.
		c.wait = max(c.wait, opts.MinBackoff)
		if !waitfor.Sleep(ctx, c.wait) {
			return true, nil
		}
		c.wait = min(2*c.wait, opts.MaxBackoff)
	}
	c.rounds++
	// The greeting of a throwaway connection names the metadata: the
	// refusal's close frame has no room for a URI.
	sub, err := wire.Subscribe(ctx, rawURL, wire.SubscribeOptions{DialOptions: opts.DialOptions})
	if err != nil {
		return false, &TailError{Msg: fmt.Sprintf("catch-up: could not read the stream's greeting to find its published tables: %v", err), Err: err}
	}
	g := *sub.Greeting()
	_ = sub.Close()

	last := wire.Null
	at, err := opts.CatchUp(ctx, &g, *next, func(offset, ts int64, row []byte) error {
		line := row
		if !opts.Rows {
			c.line = wire.AppendFrame(c.line[:0], offset, ts, row)
			line = c.line
		}
		if !w.add(line, offset, true) {
			return errWriter
		}
		last = offset
		res.Rows++
		if res.First == wire.Null {
			res.First = offset
		}
		res.Last = offset
		if opts.Count > 0 && res.Rows >= opts.Count {
			return errTailDone
		}
		return nil
	})
	switch {
	case errors.Is(err, errTailDone) || (err != nil && ctx.Err() != nil):
		return true, nil
	case errors.Is(err, errWriter):
		return true, w.failure()
	case err != nil:
		resume := *next
		if last != wire.Null {
			resume = last + 1
		}
		return false, &TailError{Msg: fmt.Sprintf("catch-up: reading the published tables from offset %d failed: %v; rerun at offset %d (with the same --cursor, or --offset %d) to lose nothing", *next, err, resume, resume), Err: err}
	}
	*next, c.lastAt = at, at
	return false, nil
}

// exhausted is the failure after the last round: the server still
// refuses where the tables end.
func (c *catchUpState) exhausted(at int64, nr *wire.NotReplayable, rounds int) error {
	window := "the server still refuses it"
	if nr != nil {
		switch {
		case nr.Why == wire.WhyTooOld && nr.EndOffset != wire.Null && nr.MaxReplay != wire.Null:
			window = fmt.Sprintf("the server replays only the last max_replay=%d rows below its frontier %d, from offset %d", nr.MaxReplay, nr.EndOffset, nr.EndOffset-nr.MaxReplay)
		case nr.Why == wire.WhyEvicted && nr.Earliest != wire.Null:
			window = fmt.Sprintf("the server serves offsets from %d only", nr.Earliest)
		}
	}
	var cause error = errors.New("catch-up rounds exhausted")
	if nr != nil {
		cause = nr
	}
	return &TailError{Msg: fmt.Sprintf("catch-up gave up after %d rounds: the published tables end at offset %d, but %s, so rows from %d on are in neither yet (rows before %d were printed). "+
		"Raise the stream's max_replay, publish more often (a shorter flush_every or publish_every), or allow more rounds with --catch-up-rounds; rerun with the same --cursor (or --offset %d) to go on from here",
		rounds, at, window, at, at, at), Err: cause}
}

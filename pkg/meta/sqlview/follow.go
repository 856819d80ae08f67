package sqlview

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/streamcast/streamcast/pkg/meta/history"
)

// Pin is one cut of a history for a live view's refresh.
type Pin struct {
	Table Table
	// End is the offset the cut is consistent to: it holds every row
	// below End and none at or above it. A negative End asks Follow to
	// find it (one more pass over the offsets).
	End int64
	// Close releases the cut once the next one replaced it; nil when
	// there is nothing to release.
	Close func() error
}

// Pinner cuts a history afresh for each refresh of a live view: the
// published base re-pinned to what is published now, plus the live tail's
// rows held in memory above it (LivePinner).
type Pinner interface {
	Pin(ctx context.Context) (Pin, error)
}

// LivePinner cuts each refresh from l: the base re-pinned to what is
// published, and the tail rows above it, read as one table log. A tail
// that outgrew its bound ends the view with l's refusal.
func LivePinner(l *history.Live) Pinner {
	return PinFunc(func(ctx context.Context) (Pin, error) {
		r, err := l.Pin(ctx)
		if err != nil {
			return Pin{}, err
		}
		_, end := r.Extent()
		return Pin{Table: r, End: end, Close: r.Close}, nil
	})
}

// PinFunc is a Pinner written as a function.
type PinFunc func(ctx context.Context) (Pin, error)

// Pin calls f.
func (f PinFunc) Pin(ctx context.Context) (Pin, error) { return f(ctx) }

// Refresh is one result of a live view.
type Refresh struct {
	Seq  int       // 1 for the first result
	End  int64     // the offset the result is consistent to
	At   time.Time // when the cut was pinned
	Rows *Rows     // read them before the emit function returns
}

// Follow keeps query current: it pins a cut, runs the query over it and
// hands the result to emit, then again every interval, until ctx ends
// (nil error) or a pin, the query or emit fails. A result is always of one
// whole cut: Follow never answers from part of one, and a Pinner that
// cannot cut exactly (its tail grew past its bound) ends the view with its
// error.
func Follow(ctx context.Context, p Pinner, opts Options, query string, every time.Duration, now func() time.Time, emit func(Refresh) error) error {
	if every <= 0 {
		return fmt.Errorf("sqlview: a live view refreshes every positive interval, not %v", every)
	}
	if now == nil {
		now = time.Now
	}
	f := &follower{p: p, opts: opts, query: query, now: now, emit: emit}
	defer f.close()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for seq := 1; ; seq++ {
		err := f.round(ctx, seq)
		if ctx.Err() != nil {
			// Ending the view ends whatever step was running; that
			// step's error is the cancellation, not a failure.
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// follower is the state of one Follow.
type follower struct {
	p     Pinner
	opts  Options
	query string
	now   func() time.Time
	emit  func(Refresh) error

	v         *View        // opened on the first round
	closePrev func() error // releases the cut v read last
}

// round is one refresh: pin, point log at the cut, query, emit.
func (f *follower) round(ctx context.Context, seq int) error {
	at := f.now()
	pin, err := f.p.Pin(ctx)
	if err != nil {
		return err
	}
	if f.v == nil {
		f.v, err = Open(ctx, pin.Table, f.opts)
	} else {
		err = f.v.Replace(ctx, pin.Table)
	}
	if f.closePrev != nil {
		f.closePrev()
	}
	f.closePrev = pin.Close
	if err != nil {
		return err
	}
	if pin.End < 0 {
		if pin.End, err = f.v.end(ctx); err != nil {
			return err
		}
	}
	return f.v.emitOne(ctx, f.query, Refresh{Seq: seq, End: pin.End, At: at}, f.emit)
}

func (f *follower) close() {
	if f.v != nil {
		f.v.Close()
	}
	if f.closePrev != nil {
		f.closePrev()
	}
}

func (v *View) emitOne(ctx context.Context, query string, r Refresh, emit func(Refresh) error) error {
	rows, err := v.Query(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	r.Rows = rows
	return emit(r)
}

// end is one above the largest offset in the cut log reads (before any
// --filter), 0 when it is empty.
func (v *View) end(ctx context.Context) (int64, error) {
	table := "temp.log"
	if len(v.opts.Filters) > 0 {
		table = "temp.log_unfiltered"
	}
	rows, err := v.Query(ctx, "SELECT max("+columnOffset+") FROM "+table)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	if !rows.Next() {
		return 0, errors.Join(errors.New("sqlview: max(streamcast_offset) returned no row"), rows.Err())
	}
	var n sql.NullInt64
	if err := n.Scan(rows.Values()[0]); err != nil {
		return 0, err
	}
	if !n.Valid {
		return 0, nil
	}
	return n.Int64 + 1, nil
}

// WriteRefresh prints one result of a live view: in FormatNDJSON one line,
// {"seq":…,"end_offset":…,"at":…,"rows":[…]}; in FormatTable the screen
// cleared, a line saying what the result is consistent to, and the table.
func WriteRefresh(w io.Writer, r Refresh, f Format) error {
	switch f {
	case FormatNDJSON:
		line := fmt.Appendf(nil, `{"seq":%d,"end_offset":%d,"at":%q,"rows":`, r.Seq, r.End, r.At.UTC().Format(time.RFC3339Nano))
		if _, err := w.Write(line); err != nil {
			return err
		}
		if _, err := writeJSONRows(w, r.Rows, jsonLayout{open: "[", sep: ",", close: "]}\n"}); err != nil {
			return err
		}
	case FormatTable:
		// Home the cursor and clear the screen, so each result redraws
		// the last in place.
		if _, err := fmt.Fprintf(w, "\x1b[H\x1b[2J%s: consistent to offset %d (refresh %d)\n", r.At.Format(time.DateTime), r.End, r.Seq); err != nil {
			return err
		}
		if _, err := writeTable(w, r.Rows); err != nil {
			return err
		}
	default:
		return fmt.Errorf("a live view prints %s or %s, not %s", FormatTable, FormatNDJSON, f)
	}
	return r.Rows.Err()
}

package txbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/streamcast/streamcast/pkg/wire"
)

// subState is a subscriber's row of InboxStateTable.
type subState struct {
	found    bool
	streamID string
	last     int64 // the last offset received
}

func loadState(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, d Dialect, subscriber string) (subState, error) {
	var s subState
	err := q.QueryRowContext(ctx, d.Rebind("SELECT stream_id, last_offset FROM "+InboxStateTable+" WHERE subscriber = ?"), subscriber).Scan(&s.streamID, &s.last)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return subState{}, nil
	case err != nil:
		return subState{}, stateError(StateRead, subscriber, err, fmt.Sprintf("read %s for subscriber %q", InboxStateTable, subscriber), "")
	}
	s.found = true
	return s, nil
}

// bindState records subscriber's first connect: the stream id and the
// offset before its first row. A row another process wrote first is kept;
// the caller reads it back and checks it.
func bindState(ctx context.Context, db *sql.DB, d Dialect, subscriber, streamID string, last int64) error {
	_, err := db.ExecContext(ctx, d.Rebind("INSERT INTO "+InboxStateTable+" (subscriber, stream_id, last_offset) VALUES (?, ?, ?) ON CONFLICT (subscriber) DO NOTHING"),
		subscriber, streamID, last)
	if err != nil {
		return stateError(StateWrite, subscriber, err, fmt.Sprintf("bind subscriber %q to stream id %s in %s", subscriber, streamID, InboxStateTable), "")
	}
	return nil
}

// checkGreeting refuses a stream an inbox cannot receive exactly: one
// without a log (no offsets to resume at) or without an identity to bind.
func checkGreeting(g *wire.Greeting, url string) error {
	switch {
	case !g.Durable || g.EndOffset == wire.Null:
		return fmt.Errorf("txbox: stream %q at %s is live-only (it keeps no log), so it has no offsets to resume at; an inbox needs a durable stream", g.Stream, url)
	case g.StreamID == "":
		return fmt.Errorf("txbox: stream %q at %s greets without a stream id, so the inbox cannot tell it from a recreated one; upgrade the server", g.Stream, url)
	}
	return nil
}

// OffsetGiven is the refusal of a start offset for a subscriber that has
// state: it resumes one above the last offset it received, and an offset
// from the caller would skip or repeat rows.
type OffsetGiven struct {
	Subscriber string
	Last       int64 // the last offset received
	Asked      int64
}

// Error names both offsets and the way out.
func (e *OffsetGiven) Error() string {
	return "txbox: subscriber " + strconv.Quote(e.Subscriber) + " has received up to offset " + strconv.FormatInt(e.Last, 10) +
		" and resumes at " + strconv.FormatInt(e.Last+1, 10) + ", so it takes no start offset (asked " + strconv.FormatInt(e.Asked, 10) +
		"); leave the offset out, or delete its row of " + InboxStateTable + " (and its rows of " + InboxTable + ") to start it over"
}

// ErrCatchUpUnavailable is NewInbox's refusal of CatchUp: reading a gap
// from the published tables is not built into the client yet.
var ErrCatchUpUnavailable = errors.New("txbox: CatchUp is not available yet (the client cannot read a gap from the published tables); " +
	"leave it off: a subscriber whose resume offset the server no longer serves is refused with the numbers, and the rows are in the stream's published Iceberg table for any Iceberg reader")

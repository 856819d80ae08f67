package history

import (
	"context"
	"fmt"
	"slices"

	"github.com/streamcast/streamcast/pkg/wire"
)

// tailRow is one row read from a broker past the published end, as the
// server sent it.
type tailRow struct {
	offset, ts int64
	row        []byte // canonical JSON
}

// readTail reads offsets [from, upTo] of the stream from opts.Broker: the
// rows no table holds yet. It refuses more than opts.MaxTail rows, and a
// server whose frontier is at or below upTo (the offset was never written).
func readTail(ctx context.Context, opts Options, stream string, from, upTo int64) ([]tailRow, error) {
	want := upTo + 1 - from
	if want > opts.MaxTail {
		return nil, &Refusal{Why: WhyMaxTail, Msg: fmt.Sprintf("stream %q: offsets %d to %d are past the published end, %d rows, more than --max-tail %d: publishing is behind; raise --max-tail, give an earlier --as-of-offset, or wait for publishing to catch up",
			stream, from, upTo, want, opts.MaxTail)}
	}
	sub, err := wire.Subscribe(ctx, opts.Broker, wire.SubscribeOptions{DialOptions: opts.Dial, Offset: wire.At(from)})
	if err != nil {
		return nil, fmt.Errorf("stream %q: read offsets %d to %d from %s, past the published end: %w", stream, from, upTo, opts.Broker, err)
	}
	defer sub.Close()
	g := sub.Greeting()
	if g.EndOffset != wire.Null && g.EndOffset <= upTo {
		return nil, &Refusal{Why: WhyNoTier, Msg: fmt.Sprintf("stream %q: --as-of-offset %d is past the server's frontier %d (its next offset); no row %d exists yet; give --as-of-offset %d or earlier",
			stream, upTo, g.EndOffset, upTo, g.EndOffset-1)}
	}
	rows := make([]tailRow, 0, min(want, 1<<16))
	next := from
	for next <= upTo {
		m, err := sub.Recv(ctx)
		if err != nil {
			return nil, fmt.Errorf("stream %q: reading offsets %d to %d from %s stopped at %d: %w", stream, from, upTo, opts.Broker, next, err)
		}
		if m.Offset < next {
			return nil, fmt.Errorf("stream %q: %s sent offset %d after %d; offsets must increase", stream, opts.Broker, m.Offset, next-1)
		}
		if m.Offset > upTo {
			break
		}
		rows = append(rows, tailRow{offset: m.Offset, ts: m.TS, row: slices.Clone(m.Row)})
		next = m.Offset + 1
	}
	return rows, nil
}

package metrics

import (
	"sync/atomic"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/wire"
)

// refusalCodes are the close codes counted as refusals: the request (or a
// frame of it) was refused with a reason. 4429 is counted apart, as a
// drop; the clean closes (1000, 1001) and failures (1011) are not counted.
var refusalCodes = [...]int{
	wire.CloseTooBig,
	wire.CloseBadRequest,
	wire.CloseNoSuchStream,
	wire.CloseSuperseded,
	wire.CloseRetired,
	wire.CloseExactlyOnceUnavailable,
	wire.CloseNotReplayable,
}

// Stream is one stream's counters, kept by the hot path with atomic adds.
// pkg/broker holds one per stream while metrics are enabled (nil when
// they are not, so the paths that time things skip the clock).
type Stream struct {
	// RowsCommitted counts rows committed to the log (on a live-only
	// stream, rows accepted and fanned out), and CommitGroups the
	// commits (groups) that carried them.
	RowsCommitted atomic.Int64
	CommitGroups  atomic.Int64
	// CommitLatency is the time of each group's append, fsync included.
	CommitLatency Histogram
	// AckLatency is, per publish frame, the time from reading it to
	// queueing its reply: validation, the wait in the inbox, the commit
	// and the fan-out.
	AckLatency Histogram
	// FramesDelivered counts data frames written to subscribers, replayed
	// and live.
	FramesDelivered atomic.Int64

	drops    atomic.Int64 // subscribers closed with 4429
	refusals [len(refusalCodes)]atomic.Int64
	replayed [logstore.NumTiers]atomic.Int64
}

// Closed counts a close the server sent with code: 4429 as a drop, a
// refusal's code as a refusal, anything else not at all.
func (m *Stream) Closed(code int) {
	if code == wire.CloseTooSlow {
		m.drops.Add(1)
		return
	}
	for i, c := range refusalCodes {
		if c == code {
			m.refusals[i].Add(1)
			return
		}
	}
}

// Replayed adds the rows a replay read, by tier.
func (m *Stream) Replayed(rows *logstore.TierRows) {
	for t, n := range rows {
		if n != 0 {
			m.replayed[t].Add(n)
		}
	}
}

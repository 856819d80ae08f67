package broker

import "github.com/streamcast/streamcast/pkg/wire"

// replayRequest is what a subscribe asked for.
type replayRequest struct {
	Given  bool  // ?offset= was present
	Offset int64 // the offset asked for; 0 = earliest
}

// replayExtent is a log's offsets as a subscribe reads them before the fan-out
// lock: [earliest, end) held, start, the log's first offset, and HoleEnd,
// the end of the recorded hole (a range a restore skipped past its fence)
// holding the offset asked for, 0 when it lies in none.
type replayExtent struct{ Earliest, End, Start, HoleEnd int64 }

// replayHeld is a count of the rows the log holds in [from, to), taken
// outside the fan-out lock for a subscribe the offset distance would refuse
// (max_replay counts rows, not offsets). The zero replayHeld: not counted.
type replayHeld struct{ From, To, N int64 }

// startReplay decides where a subscription starts, or why it cannot be
// served exactly (I6). ext is the log's extent (read just before the fan-out
// lock was taken), frontier the stream's end read under it, maxReplay the
// stream's bound (-1: unbounded), held a count of the rows in the replay
// window when one was taken. replay reports whether the greeting carries a
// replay window.
func startReplay(req replayRequest, durable bool, ext replayExtent, frontier, maxReplay int64, held replayHeld) (start int64, replay bool, refusal *wire.NotReplayable) {
	earliest, logEnd := ext.Earliest, ext.End
	if !req.Given {
		return frontier, false, nil
	}
	if !durable {
		return 0, false, &wire.NotReplayable{Why: wire.WhyNotDurable, Offset: req.Offset, Earliest: wire.Null, EndOffset: wire.Null, MaxReplay: wire.Null}
	}
	nr := func(why string) *wire.NotReplayable {
		mr := maxReplay
		if mr < 0 {
			mr = wire.Null
		}
		return &wire.NotReplayable{Why: why, Offset: req.Offset, Earliest: earliest, EndOffset: frontier, MaxReplay: mr}
	}
	start = req.Offset
	if ext.HoleEnd > start {
		// A hole is not a refusal: no row was ever served there (a
		// restore skipped it past its fence), so the subscription starts
		// at its end, and the frames say where they are.
		start = ext.HoleEnd
	}
	if req.Offset == 0 {
		// Earliest. A log that never held a row is not refused: the
		// subscriber gets every row from the first one. A log whose rows
		// have all gone (retention) has nothing to replay, and saying so
		// beats silently starting at the frontier.
		if earliest == logEnd && logEnd > ext.Start && earliest >= frontier {
			return 0, false, nr(wire.WhyEmpty)
		}
		start = earliest
	}
	if start > frontier {
		if req.Offset == 0 {
			// earliest past the frontier cannot happen with one writer;
			// refuse rather than guess.
			return 0, false, nr(wire.WhyEvicted)
		}
		return 0, false, nr(wire.WhyAhead)
	}
	if maxReplay >= 0 && frontier-start > maxReplay {
		// The distance costs nothing and bounds the count from above; only
		// a window it refuses is counted (holes hold no rows). Rows
		// committed since the count are dense, so they add their distance.
		if held.To == 0 || held.From != start || held.To > frontier || held.N+(frontier-held.To) > maxReplay {
			return 0, false, nr(wire.WhyTooOld)
		}
	}
	if start < earliest {
		return 0, false, nr(wire.WhyEvicted)
	}
	return start, true, nil
}

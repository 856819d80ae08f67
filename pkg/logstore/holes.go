package logstore

import "context"

// readHoles reads the holes table through q, oldest first (a log no
// writer opened since the table was added has none).
func readHoles(ctx context.Context, q querier) ([]Span, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'holes'`).Scan(&n); err != nil || n == 0 {
		return nil, err
	}
	return spans(ctx, q, `SELECT start_offset, end_offset FROM holes ORDER BY start_offset`)
}

// holeAt returns the hole of hs holding off.
func holeAt(hs []Span, off int64) (Span, bool) {
	for _, h := range hs {
		if h.Start <= off && off < h.End {
			return h, true
		}
	}
	return Span{}, false
}

// holeSpans reports whether holes of hs cover [from, to) end to end (and
// it is not empty): the offsets between two tiers that a restore skipped.
func holeSpans(hs []Span, from, to int64) bool {
	next := from
	for next < to {
		h, ok := holeAt(hs, next)
		if !ok {
			return false
		}
		next = h.End
	}
	return next == to && from < to
}

// holeRows returns how many offsets of [from, to) the holes of hs cover.
func holeRows(hs []Span, from, to int64) int64 {
	var n int64
	for _, h := range hs {
		n += max(0, min(h.End, to)-max(h.Start, from))
	}
	return n
}

// heldEnd returns the end of the rows held below end, given the log's
// holes hs: end itself, or the start of the holes that reach up to end.
func heldEnd(hs []Span, end int64) int64 {
	for {
		h, ok := holeAt(hs, end-1)
		if !ok {
			return end
		}
		end = h.Start
	}
}

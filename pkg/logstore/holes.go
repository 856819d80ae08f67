package logstore

import (
	"context"
	"fmt"
)

// Holes returns the offset ranges recorded as skipped on purpose, oldest
// first. A restore resumes past a fence and records the range it jumped
// over (docs/design.md §4.8): no tier holds a row there, ever, so reads
// skip it, counts leave it out, and seal and publish step over it.
func (l *Log) Holes(ctx context.Context) ([]Span, error) {
	if err := l.checkOpen(); err != nil {
		return nil, err
	}
	hs, err := ReadHoles(ctx, l.rdb)
	if err != nil {
		return nil, fmt.Errorf("read the holes of log %s: %w", l.dir, err)
	}
	return hs, nil
}

// HoleEnd returns the end of the recorded hole holding off, and ok=false
// when off lies in none: a subscriber asking for an offset inside a hole
// starts at its end.
func (l *Log) HoleEnd(ctx context.Context, off int64) (end int64, ok bool, err error) {
	hs, err := l.Holes(ctx)
	if err != nil {
		return 0, false, err
	}
	if h, ok := holeAt(hs, off); ok {
		return h.End, true, nil
	}
	return 0, false, nil
}

// ReadHoles reads the holes table through q, oldest first (a log no
// writer opened since the table was added has none).
func ReadHoles(ctx context.Context, q Querier) ([]Span, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'holes'`).Scan(&n); err != nil || n == 0 {
		return nil, err
	}
	return Spans(ctx, q, `SELECT start_offset, end_offset FROM holes ORDER BY start_offset`)
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

// HoleSpans reports whether holes of hs cover [from, to) end to end (and
// it is not empty): the offsets between two tiers that a restore skipped.
func HoleSpans(hs []Span, from, to int64) bool {
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

// HeldEnd returns the end of the rows held below end: end itself, or the
// start of the recorded holes that reach up to end. Right after a restore
// the log's next offset sits at the end of its hole, and a replay that
// announced end as its last offset would keep a reader waiting for rows
// that never were.
func (l *Log) HeldEnd(ctx context.Context, end int64) (int64, error) {
	hs, err := l.Holes(ctx)
	if err != nil {
		return 0, err
	}
	for {
		h, ok := holeAt(hs, end-1)
		if !ok {
			return end, nil
		}
		end = h.Start
	}
}

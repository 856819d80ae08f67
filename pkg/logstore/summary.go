package logstore

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/streamcast/streamcast/pkg/schema"
)

// Summary is what a log's tier records say about the rows it holds at or
// above its floor, read without touching a row: the span of their
// streamcast_ts, and each declared column's min, max and null count. It is for
// pruning whole logs (the stream metadata rolls it up): every bound errs
// wide, never narrow.
type Summary struct {
	// HasTS reports that the log holds a row; FirstTS and LastTS (µs) are
	// the least and greatest streamcast_ts of its records then. A file
	// straddling the floor counts whole.
	HasTS           bool
	FirstTS, LastTS int64
	// Stats maps a declared column to its [min, max] as canonical JSON
	// scalars (the form file records keep), merged over every file. It is
	// nil when some rows are only in the buffer, which keeps no statistics,
	// and lacks a column some file has no statistics for.
	Stats map[string][2]json.RawMessage
	// Nulls maps a declared column to its number of nulls, summed over
	// the files once each (a file both local and published counts once).
	// It is nil when Stats is, and lacks a column some file has no count
	// for (files sealed before null counts were kept). Like the stamps, a
	// file straddling the floor counts whole, so a count errs high, never
	// low.
	Nulls map[string]int64
}

// summarize rolls up the file records (local and published) and the
// stamps of the buffered groups of a log at or above floor, read through q
// (one read transaction): sch is the log's schema, tiers says whether it
// has a published tier, end is its next offset. records wholly below floor
// go uncounted.
func summarize(ctx context.Context, q querier, sch *schema.Schema, tiers bool, floor, end int64) (Summary, error) {
	var s Summary
	// The order AddRecord needs to count a file in both tiers once.
	files := `SELECT min_ts, max_ts, stats, start_offset, end_offset FROM files WHERE end_offset > ?1`
	if tiers {
		files += ` UNION ALL SELECT min_ts, max_ts, stats, start_offset, end_offset FROM published WHERE end_offset > ?1`
	}
	files += ` ORDER BY start_offset, end_offset DESC`
	rows, err := q.QueryContext(ctx, files, floor)
	if err != nil {
		return Summary{}, err
	}
	m := NewMerger(sch)
	var sealed int64
	seen := func(lo, hi int64) {
		if !s.HasTS {
			s.HasTS, s.FirstTS, s.LastTS = true, lo, hi
			return
		}
		s.FirstTS, s.LastTS = min(s.FirstTS, lo), max(s.LastTS, hi)
	}
	for rows.Next() {
		var lo, hi, b, e int64
		var stats string
		if err := rows.Scan(&lo, &hi, &stats, &b, &e); err != nil {
			rows.Close()
			return Summary{}, err
		}
		seen(lo, hi)
		m.AddRecord(b, e, []byte(stats))
		sealed = max(sealed, e)
	}
	if err := rows.Close(); err != nil {
		return Summary{}, err
	}
	var lo, hi sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT min(ts), max(ts) FROM groups WHERE first + n > ?`, max(floor, sealed)).Scan(&lo, &hi); err != nil {
		return Summary{}, err
	}
	if lo.Valid {
		seen(lo.Int64, hi.Int64)
	}
	// A restore's fence leaves a hole from the last row held to the end;
	// the files cover everything there is when only holes lie past them.
	if sealed > 0 && sealed < end {
		hs, err := readHoles(ctx, q)
		if err != nil {
			return Summary{}, err
		}
		if holeSpans(hs, sealed, end) {
			sealed = end
		}
	}
	if sealed >= end && sealed > 0 && !sch.IsAny() {
		s.Stats, s.Nulls = map[string][2]json.RawMessage{}, map[string]int64{}
		for col, c := range m.Columns() {
			if c.HasBounds() {
				s.Stats[col] = [2]json.RawMessage{c.Min, c.Max}
			}
			if c.Nulls != nil {
				s.Nulls[col] = *c.Nulls
			}
		}
	}
	return s, nil
}

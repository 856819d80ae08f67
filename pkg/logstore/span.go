// Package catalog answers questions about a log from the records in its
// buffer.db alone, never reading a row: how many rows a range holds, what
// the tiers say about the rows' timestamps and columns, which offset
// ranges a restore skipped (the holes), and the tiers' figures for /stats.
// Every function reads through a Querier the caller gives, usually one read
// transaction, so its answer is one snapshot; package logstore opens the
// transaction and keeps the Log methods that callers use.
package logstore

import (
	"context"
	"fmt"
)

// Span is an offset range [Start, End).
type Span struct{ Start, End int64 }

// Spans runs query, which selects start and end offsets, and returns them.
func Spans(ctx context.Context, q Querier, query string) ([]Span, error) {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("read intents: %w", err)
	}
	defer rows.Close()
	var out []Span
	for rows.Next() {
		var r Span
		if err := rows.Scan(&r.Start, &r.End); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Offset spans are the unit of the answers read from a log's buffer.db records
// alone, never from a row: how many rows a range holds, what the tiers say
// about the rows' timestamps and columns, which offset ranges a restore
// skipped (the holes), and the tiers' figures for /stats. Each of those
// functions reads through a querier the caller gives, usually one read
// transaction, so its answer is one snapshot; the Log methods of
// catalog.go open that transaction.

package logstore

import (
	"context"
	"fmt"
)

// Span is an offset range [Start, End).
type Span struct{ Start, End int64 }

// spans runs query, which selects start and end offsets, and returns them.
func spans(ctx context.Context, q querier, query string) ([]Span, error) {
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

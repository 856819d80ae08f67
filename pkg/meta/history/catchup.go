package history

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// CatchUpOptions say where a catch-up reads a stream's published tables.
type CatchUpOptions struct {
	// MetadataURI is the stream's published metadata: the greeting's
	// metadata_hint or metadata, or what the caller named.
	MetadataURI string
	// StreamID, when set, is the identity the greeting named; metadata
	// of another stream is refused.
	StreamID string
	// Where is the subscription's filter, applied to the table rows with
	// the server's filter code.
	Where json.RawMessage
	// S3 says how s3:// locations are reached (see Options.S3).
	S3 warehouse.S3
}

// CatchUp reads the rows a server refused to replay (4416 too_old or
// evicted) from the stream's published tables, with no socket open, so a
// slow read can never get a subscriber dropped: every published row from
// offset from (0: the first the tables still hold) in offset order, each
// as the server would have sent it. It returns where the tables end: the
// offset to subscribe at next. A from below what the tables still hold
// (deleted by retention, or never published) is refused, naming both
// numbers; a from at or past their end reads nothing and returns from.
func CatchUp(ctx context.Context, o CatchUpOptions, from int64, fn func(offset, ts int64, row []byte) error) (next int64, err error) {
	r, err := Open(ctx, Options{MetadataURI: o.MetadataURI, StreamID: o.StreamID, S3: o.S3})
	if err != nil {
		return from, err
	}
	defer r.Close()
	start, end := r.Extent()
	if from == 0 {
		from = start
	}
	if from >= end {
		return from, nil
	}
	if from < start {
		return from, &Refusal{Why: WhyBelowFloor, Msg: fmt.Sprintf("stream %q: the published tables hold offsets %d to %d, so rows %d to %d are in no tier (deleted by retention, or never published); resume at %d (or with --offset earliest) to accept the gap",
			r.md.Stream, start, end-1, from, start-1, start)}
	}
	if err := r.Rows(ctx, from, end, o.Where, fn); err != nil {
		return from, err
	}
	return end, nil
}

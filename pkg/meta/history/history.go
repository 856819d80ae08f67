package history

import (
	"time"

	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/wire"
)

// Options says which stream to read and as of which fixed point. Exactly
// one of Root (with Stream) or MetadataURI addresses the stream.
type Options struct {
	// Root is a server's local root; the stream's metadata is read from
	// its home there.
	Root string
	// Published is the config's published: prefix, when it is not the
	// default under Root.
	Published string
	// Stream is the stream's name.
	Stream string
	// MetadataURI is the published plain copy of the stream's metadata
	// (file://… or s3://…, as the greeting's "metadata" gives it). It
	// makes the history readable from a machine with only access to the
	// published prefix.
	MetadataURI string
	// StreamID, when set, is the identity the caller expects; metadata
	// naming another is refused.
	StreamID string

	// At most one of AsOfOffset and AsOfTS may be set. With neither, the
	// read covers everything published.
	AsOfOffset *int64
	AsOfTS     *time.Time

	// Broker is a running server's WebSocket URL, used to read rows past
	// the published end when AsOfOffset asks for them; without it such a
	// read is refused.
	Broker string
	// MaxTail bounds the rows read from Broker (default 1,000,000).
	MaxTail int64
	// Dial is how Broker is reached (TLS, credentials).
	Dial wire.DialOptions

	// S3 says how s3:// metadata and tables are reached; credentials come
	// from the standard AWS chain. An empty Endpoint falls back to
	// AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or AWS_S3_ENDPOINT.
	S3 warehouse.S3
}

// Op is a comparison a Bound makes.
type Op string

// The comparisons a Bound may make.
const (
	OpEq Op = "="
	OpLt Op = "<"
	OpLe Op = "<="
	OpGt Op = ">"
	OpGe Op = ">="
	OpIn Op = "in"
)

// Bound is one constraint on a column: Column Op Values[0], or Column IN
// Values. Values are int64, float64, string, bool or []byte. Bounds passed
// together are ANDed.
type Bound struct {
	Column string
	Op     Op
	Values []any
}

// ScanRequest is one pass over the history.
type ScanRequest struct {
	// Columns is the projection, by name; nil means every column. Only
	// these columns are decoded.
	Columns []string
	// Bounds let Scan skip logs, files and row groups whose statistics
	// prove them empty. Rows are never filtered by them.
	Bounds []Bound
	// From and To, when not zero, restrict the rows exactly to offsets
	// [From, To) (snapshot's --start-offset and --end-offset). A From
	// below the stream's first held offset and a To past the cut's end
	// are refused, naming both numbers.
	From, To int64
}

// ScanStats counts what a Reader's scans opened and skipped, so tests
// and benchmarks can show that pruning happens.
type ScanStats struct {
	LogsSkipped  int
	FilesOpened  int
	FilesSkipped int
}

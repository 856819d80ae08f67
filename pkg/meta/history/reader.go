package history

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
)

// DefaultMaxTail is Options.MaxTail's default.
const DefaultMaxTail = 1_000_000

// Reader reads one pinned cut of a stream's history.
type Reader struct {
	opts   Options
	md     *meta.Metadata
	parts  []*part
	schema *arrow.Schema
	start  int64 // the first offset the cut may hold (the floor, or the first log's start)
	end    int64 // one past the last offset the cut holds
	asOfTS int64 // rows stamped later are left out; MaxInt64 without AsOfTS

	mu    sync.Mutex // guards stats
	stats ScanStats
}

// Open resolves the stream's metadata and pins each table's snapshot.
func Open(ctx context.Context, opts Options) (*Reader, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	if opts.MaxTail == 0 {
		opts.MaxTail = DefaultMaxTail
	}
	if opts.S3.Endpoint == "" {
		for _, v := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_S3_ENDPOINT"} {
			if e := os.Getenv(v); e != "" {
				opts.S3.Endpoint = e
				break
			}
		}
	}
	md, err := loadMetadata(ctx, opts)
	if err != nil {
		return nil, err
	}
	if opts.StreamID != "" && md.StreamID != opts.StreamID {
		return nil, &Refusal{Why: WhyStreamID, Msg: fmt.Sprintf("the metadata of stream %q names stream_id %s, but %s was expected: it belongs to another stream (or one recreated under the same name); give the metadata URI of the stream you mean",
			md.Stream, md.StreamID, opts.StreamID)}
	}
	r := &Reader{opts: opts, md: md, asOfTS: maxInt64}
	for _, lg := range md.Logs {
		p, err := pin(ctx, md, lg, opts.S3)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("stream %q: %w", md.Stream, err)
		}
		r.parts = append(r.parts, p)
	}
	if err := r.cut(ctx); err != nil {
		r.Close()
		return nil, err
	}
	r.schema = unionSchema(r.parts)
	return r, nil
}

const maxInt64 = int64(^uint64(0) >> 1)

func (o *Options) check() error {
	switch {
	case o.MetadataURI == "" && (o.Root == "" || o.Stream == ""):
		return errors.New("history: give the stream's local root and name, or its metadata URI")
	case o.MetadataURI != "" && o.Root != "":
		return errors.New("history: give the stream's local root or its metadata URI, not both")
	case o.AsOfOffset != nil && o.AsOfTS != nil:
		return errors.New("give at most one fixed point: --as-of-offset or --as-of-ts")
	case o.AsOfOffset != nil && *o.AsOfOffset < 0:
		return fmt.Errorf("--as-of-offset %d is negative; give an offset of 0 or more", *o.AsOfOffset)
	case o.MaxTail < 0:
		return fmt.Errorf("--max-tail %d is negative; give a row count (0 for the default, %d)", o.MaxTail, DefaultMaxTail)
	}
	return nil
}

// loadMetadata reads the stream's current metadata once, outside any
// cache: from the metadata URI, or from the home under Root (the
// published copy when the home has none).
func loadMetadata(ctx context.Context, opts Options) (*meta.Metadata, error) {
	if opts.MetadataURI != "" {
		md, err := meta.LoadURI(ctx, opts.MetadataURI, opts.S3)
		if err != nil {
			return nil, err
		}
		if opts.Stream != "" && md.Stream != opts.Stream {
			return nil, fmt.Errorf("%s is the metadata of stream %q, not %q; give the metadata URI of %q", opts.MetadataURI, md.Stream, opts.Stream, opts.Stream)
		}
		return md, nil
	}
	lay, err := meta.NewLayout(opts.Root, opts.Published)
	if err != nil {
		return nil, err
	}
	st, err := meta.NewStore(ctx, lay, opts.Stream, opts.S3)
	if err != nil {
		return nil, err
	}
	md, err := st.Load(ctx)
	if errors.Is(err, meta.ErrNoMetadata) {
		md, err = st.LoadPublished(ctx)
	}
	if errors.Is(err, meta.ErrNoMetadata) {
		return nil, fmt.Errorf("stream %q has no metadata under %s or at its published prefix: it has no history to read yet; check the stream's name and --config's root", opts.Stream, lay.StreamDir(opts.Stream))
	}
	return md, err
}

// cut decides what each part contributes: its rows at or above the floor
// up to the fixed point, and checks the tables hold them all.
func (r *Reader) cut(ctx context.Context) error {
	floor := int64(0)
	if f := r.md.Retention.Floor; f != nil {
		floor = *f
	}
	if len(r.parts) > 0 {
		floor = max(floor, r.parts[0].lg.StartOffset)
	}
	r.start = floor
	for _, p := range r.parts {
		p.start = max(p.lg.StartOffset, floor)
		p.end = p.pubEnd
		if p.lg.EndOffset != nil && p.lg.State != meta.Live {
			// A closed log published every row before it closed: its end
			// is known, and a table short of it lost rows.
			p.end = max(*p.lg.EndOffset, p.start)
		}
		p.end = max(p.end, p.start)
	}
	pubEnd := r.start
	if n := len(r.parts); n > 0 {
		pubEnd = r.parts[n-1].end
	}
	r.end = pubEnd
	stream := r.md.Stream

	switch {
	case r.opts.AsOfOffset != nil:
		n := *r.opts.AsOfOffset
		if n < r.start {
			return &Refusal{Why: WhyBelowFloor, Msg: fmt.Sprintf("stream %q: --as-of-offset %d is below %d, the first offset the stream still holds (its retention floor or first row); rows up to %d were deleted; give --as-of-offset %d or later",
				stream, n, r.start, r.start-1, r.start)}
		}
		if n+1 <= pubEnd {
			r.end = n + 1
			break
		}
		if len(r.parts) == 0 {
			return &Refusal{Why: WhyNoTier, Msg: fmt.Sprintf("stream %q has no log to read offsets up to %d from", stream, n)}
		}
		last := r.parts[len(r.parts)-1]
		if last.lg.State != meta.Live {
			return &Refusal{Why: WhyNoTier, Msg: fmt.Sprintf("stream %q is retired at offset %d: offset %d was never written; give --as-of-offset %d or earlier", stream, pubEnd, n, pubEnd-1)}
		}
		if r.opts.Broker == "" {
			return &Refusal{Why: WhyUnpublished, Msg: fmt.Sprintf("stream %q: --as-of-offset %d is past the published end (the tables hold offsets below %d); rows %d to %d are only on the server: pass --broker ws://host:port/%s to read them from it (up to --max-tail rows), or give --as-of-offset %d or earlier",
				stream, n, pubEnd, pubEnd, n, stream, pubEnd-1)}
		}
		rows, err := readTail(ctx, r.opts, stream, pubEnd, n)
		if err != nil {
			return err
		}
		last.tail = rows
		last.end = n + 1
		r.end = n + 1
	case r.opts.AsOfTS != nil:
		t := r.opts.AsOfTS.UnixMicro()
		r.asOfTS = t
		newest := int64(-1 << 63)
		for _, p := range r.parts {
			if _, hi, ok := p.tsSpan(); ok {
				newest = max(newest, hi)
			}
		}
		if !r.md.Retired() && t > newest {
			have := "nothing is published yet"
			if newest > -1<<63 {
				have = "the newest published row is stamped " + time.UnixMicro(newest).UTC().Format(time.RFC3339Nano)
			}
			return &Refusal{Why: WhyUnpublished, Msg: fmt.Sprintf("stream %q: --as-of-ts %s is later than what is published (%s, offsets below %d); rows stamped after it may still be on the server only, so the answer would be short; give an earlier --as-of-ts, or --as-of-offset with --broker",
				stream, r.opts.AsOfTS.UTC().Format(time.RFC3339Nano), have, pubEnd)}
		}
	}
	for _, p := range r.parts {
		p.end = min(p.end, r.end)
		p.start = min(p.start, p.end)
	}
	return nil
}

// unionSchema is the schema of the stream read as one table:
// streamcast_offset and streamcast_ts, then every column in order of first
// appearance. A column is nullable when some log lacks it or declares it
// nullable.
func unionSchema(parts []*part) *arrow.Schema {
	fields := []arrow.Field{
		{Name: logstore.OffsetColumn, Type: arrow.PrimitiveTypes.Int64},
		{Name: logstore.TSColumn, Type: arrow.PrimitiveTypes.Int64},
	}
	at := map[string]int{}
	for _, p := range parts {
		for _, f := range p.fileSc.Fields()[2:] {
			if i, ok := at[f.Name]; ok {
				fields[i].Nullable = fields[i].Nullable || f.Nullable
				continue
			}
			at[f.Name] = len(fields)
			fields = append(fields, f)
		}
	}
	for name, i := range at {
		for _, p := range parts {
			if len(p.fileSc.FieldIndices(name)) == 0 {
				fields[i].Nullable = true
				break
			}
		}
	}
	return arrow.NewSchema(fields, nil)
}

// Schema is the unioned schema of every log read, in declaration order of
// first appearance, with streamcast_offset and streamcast_ts first.
func (r *Reader) Schema() *arrow.Schema { return r.schema }

// Extent is the offsets the cut covers, [start, end): start is the first
// offset the stream still holds (its retention floor, or its first row),
// end one past the last row of the cut. A reader carrying on live
// subscribes at end.
func (r *Reader) Extent() (start, end int64) { return r.start, r.end }

// Metadata is the stream metadata the Reader resolved.
func (r *Reader) Metadata() *meta.Metadata { return r.md }

// Stats reports what the Reader's scans have opened and skipped so far.
func (r *Reader) Stats() ScanStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

func (r *Reader) count(fn func(s *ScanStats)) {
	r.mu.Lock()
	fn(&r.stats)
	r.mu.Unlock()
}

// Close releases the Reader's pinned tables.
func (r *Reader) Close() error {
	for _, p := range r.parts {
		p.tbl.Close()
		p.tail = nil
	}
	return nil
}

package lifecycle

import (
	"context"
	"fmt"
	"os"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/schema"
)

// First is what a stream's first log is made from, when nothing of the
// stream exists anywhere: the config's declaration of it and its
// history_guard (nil when it has none).
type First struct {
	Declaration
	Guard *meta.Guard
}

// CreateFirst makes the first log of a stream that meta.Resolve found
// nowhere (meta.Absent): the log <root>/<stream>/<stream>, from the
// declaration d, then the stream's first metadata naming it, under a newly
// minted stream_id, published copy first (meta.Store.CommitFirst). serve
// and ingest both start a stream through it, so a stream is the same
// whichever of them started it. A stream with a history_guard (g) is
// refused: its consumers hold a history that a new stream would reissue
// (I8).
//
// A crash between the log and its metadata leaves a log without metadata,
// which the next Resolve records once (meta.Upgraded); what a Create
// killed before the log's buffer.db existed left is removed first. The
// log is returned open as the Writer with opts; the caller closes it.
func CreateFirst(ctx context.Context, store *meta.Store, s Stream, d Declaration, g *meta.Guard, opts ...logstore.Option) (*logstore.Log, *meta.Metadata, error) {
	if g != nil {
		return nil, nil, g.RefuseNew(s.Layout.Root(), store.PublishedURI())
	}
	sch := d.Schema
	if sch == nil {
		sch = schema.Any()
	}
	name := meta.LogName(s.Name, 1)
	dir := s.Layout.LogDir(s.Name, name)
	// A new log stores where it publishes, how to reach S3 and its tier
	// settings, for its life and for every process that maintains it.
	cfg := d.Log
	cfg.Stream, cfg.Log = s.Name, name
	cfg.Published = s.Layout.StoredPublished(s.Name, name)
	if err := logstore.RemoveUnborn(dir); err != nil {
		return nil, nil, fmt.Errorf("stream %q: %w", s.Name, err)
	}
	if err := os.MkdirAll(s.Layout.StreamDir(s.Name), 0o755); err != nil {
		return nil, nil, fmt.Errorf("stream %q: %w", s.Name, err)
	}
	lg, err := logstore.Create(dir, sch, cfg, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("stream %q: %w", s.Name, err)
	}
	md, err := store.CommitFirst(ctx, lg)
	if err != nil {
		_ = lg.Close()
		return nil, nil, fmt.Errorf("stream %q: write its first metadata: %w", s.Name, err)
	}
	return lg, md, nil
}

package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/streamcast/streamcast/internal/durable"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
)

// A durable relay's log is a cache of its upstream's, not a stream of its
// own: it gets no stream metadata, only the upstream's stream_id kept
// beside it (upstreamFile), so that a restart against another stream
// behind the URL stops loudly rather than mix two streams' offsets (I8).

// openCacheLog opens the relay cache log at dir for writing, with the
// upstream stream_id recorded in home ("" when none is). It returns a nil
// log when dir holds none, or held one that never got a row: that log is
// removed, for it holds nothing to resume from, and the relay starts
// afresh where the upstream's replay window is now rather than at a start
// that window may have left. On an error no log is left open.
func openCacheLog(ctx context.Context, dir, home, stream string, clock logstore.Clock) (*logstore.Log, string, error) {
	lg, err := logstore.Open(dir, logstore.Writer, logstore.WithClock(clock), logstore.WithIdleClose(idleCloseAfter))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", nil
	case err != nil:
		return nil, "", err
	}
	kept, err := readUpstreamID(home, stream)
	if err != nil {
		_ = lg.Close()
		return nil, "", err
	}
	if lg, err = dropUnused(ctx, lg); err != nil || lg == nil {
		return nil, "", err
	}
	return lg, kept, nil
}

// dropUnused removes a log that was made but never given a row and
// returns nil; any other log is returned as it is.
func dropUnused(ctx context.Context, lg *logstore.Log) (*logstore.Log, error) {
	_, end, err := lg.Extent(ctx)
	if err != nil {
		_ = lg.Close()
		return nil, fmt.Errorf("read the extent of %s: %w", lg.Dir(), err)
	}
	if end != lg.Config().Start {
		return lg, nil
	}
	dir := lg.Dir()
	if err := lg.Close(); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("remove the relay's unused log %s: %w", dir, err)
	}
	return nil, nil
}

// createCacheLog creates the relay cache log of sp's stream, its first
// offset start, with sp.Schema (the upstream's).
func createCacheLog(sp logSpec, lay meta.Layout, start int64) (*logstore.Log, error) {
	name := meta.LogName(sp.Stream.Name, 1)
	lc, err := sp.Server.LogSettings(sp.Stream, name)
	if err != nil {
		return nil, fmt.Errorf("stream %q: %w", sp.Stream.Name, err)
	}
	lc.Start = start
	if err := os.MkdirAll(lay.StreamDir(sp.Stream.Name), 0o755); err != nil {
		return nil, fmt.Errorf("stream %q: %w", sp.Stream.Name, err)
	}
	lg, err := logstore.Create(lay.LogDir(sp.Stream.Name, name), sp.Schema, lc, logstore.WithClock(sp.Clock), logstore.WithIdleClose(idleCloseAfter))
	if err != nil {
		return nil, fmt.Errorf("stream %q: %w", sp.Stream.Name, err)
	}
	return lg, nil
}

// upstreamFile is where a durable relay keeps its upstream's stream_id, in
// its stream directory beside the log: <root>/<stream>/<stream>.upstream.json.
func upstreamFile(home, stream string) string {
	return filepath.Join(home, stream+".upstream.json")
}

// upstreamRecord is upstreamFile's content.
type upstreamRecord struct {
	StreamID string `json:"upstream_stream_id"`
}

// readUpstreamID returns the stream_id recorded in upstreamFile, "" when
// there is none (a log kept before relays recorded it).
func readUpstreamID(home, stream string) (string, error) {
	path := upstreamFile(home, stream)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the relay's upstream identity: %w", err)
	}
	var rec upstreamRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return "", fmt.Errorf("the relay's upstream identity %s does not parse (%v); restore it, or move the relay's directory %s aside to start the relay afresh", path, err, home)
	}
	return rec.StreamID, nil
}

// recordUpstream records id as the upstream stream_id of the relay cache
// in home, durably (written aside, synced, renamed into place, directory
// synced): the stream the relay mirrors from now on.
func recordUpstream(home, stream, id string) error {
	path := upstreamFile(home, stream)
	b, err := json.Marshal(upstreamRecord{StreamID: id})
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("record the relay's upstream identity: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = durable.SyncDir(home)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("record the relay's upstream identity in %s: %w", path, err)
	}
	return nil
}

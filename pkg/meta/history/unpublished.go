package history

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
)

// Unpublished is what the stream's live log holds past a cut that reads
// everything published: rows a server serves but no table holds yet.
type Unpublished struct {
	// From and To are the offsets past the cut, [From, To): From is the
	// cut's end, To the log's next offset (holes at its end left out).
	From, To int64
	// Rows is how many rows the log holds in [From, To); fewer than
	// To-From only across a recorded hole.
	Rows int64
}

// Unpublished reports the rows the stream's live log holds past the
// Reader's cut, so a caller answering from published rows alone can say
// what it left out. It reads the log under Root through logstore's
// read-only handle (no lock taken, nothing written) after the cut was
// pinned, so rows published since are counted too: the cut still lacks
// them. ok is false when nothing is left out, when the cut was fixed
// (AsOfOffset or AsOfTS: the caller chose it), when the stream's newest
// log is not live (retired or migrating: its table holds every row), and
// when the log is not on this machine (a Reader opened by its metadata
// URI, or a root that lost the log).
func (r *Reader) Unpublished(ctx context.Context) (u Unpublished, ok bool, err error) {
	if r.opts.Root == "" || r.opts.AsOfOffset != nil || r.opts.AsOfTS != nil || len(r.parts) == 0 {
		return u, false, nil
	}
	last := r.parts[len(r.parts)-1]
	if last.lg.State != meta.Live || len(last.tail) > 0 {
		return u, false, nil
	}
	lay, err := meta.NewLayout(r.opts.Root, r.opts.Published)
	if err != nil {
		return u, false, err
	}
	lg, err := logstore.Open(lay.LogDir(r.md.Stream, last.lg.Name), logstore.ReadOnly)
	if errors.Is(err, fs.ErrNotExist) {
		return u, false, nil
	}
	if err != nil {
		return u, false, fmt.Errorf("stream %q: count the rows past the published end: %w", r.md.Stream, err)
	}
	defer lg.Close()
	_, end, err := lg.Extent(ctx)
	if err == nil {
		// A restore leaves the next offset past a hole; no row waits there.
		end, err = lg.HeldEnd(ctx, end)
	}
	if err != nil {
		return u, false, fmt.Errorf("stream %q: count the rows past the published end: %w", r.md.Stream, err)
	}
	if end <= r.end {
		return u, false, nil
	}
	n, err := lg.CountRows(ctx, r.end, end)
	if err != nil {
		return u, false, fmt.Errorf("stream %q: count the rows past the published end: %w", r.md.Stream, err)
	}
	if n == 0 {
		return u, false, nil
	}
	return Unpublished{From: r.end, To: end, Rows: n}, true, nil
}

package lifecycle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/schema/source"
)

// IngestOptions say what Ingest loads and how.
type IngestOptions struct {
	Options
	// Inputs are the source's files, read in order as one source; a Path
	// of "-" reads Stdin.
	Inputs []source.Input
	Stdin  io.Reader
	// SkipRows skips the source's first rows (what an earlier run
	// loaded). SkipRowsGiven says the caller chose it: without it, a log
	// whose last ingest stopped partway refuses, naming where to resume.
	SkipRows      int64
	SkipRowsGiven bool
	// NoPublish leaves the rows in local files; the publish role (or the
	// next run) publishes them.
	NoPublish bool
	// Progress, when set, is called as rows are taken and files recorded.
	Progress func(IngestProgress)
	// First, when set, lets Ingest start a stream that exists nowhere
	// yet: it creates the stream's first log and metadata from it, as
	// serve would (CreateFirst), and loads into that log. Without it such
	// a stream is refused (ErrNoLog).
	First *First
}

// IngestProgress is how far an Ingest has come.
type IngestProgress struct {
	Rows       int64 // rows taken from the source
	Landed     int64 // rows in recorded files
	Files      int
	BytesRead  int64 // source bytes read
	SourceSize int64 // the source's size in bytes; -1 when unknown (stdin)
}

// Ingested is what an Ingest did, or on failure what landed before it.
type Ingested struct {
	Stream string `json:"stream"`
	Log    string `json:"log"`
	// Sealed counts the rows a previous server left in the buffer, sealed
	// into files before the load.
	Sealed int64 `json:"sealed"`
	// Rows landed, in Files files of FileBytes bytes, at offsets
	// [Start, End) (Start == End when none).
	Rows      int64 `json:"rows"`
	Files     int   `json:"files"`
	FileBytes int64 `json:"file_bytes"`
	Start     int64 `json:"first_offset"`
	End       int64 `json:"end_offset"`
	// SourceBytes read from the inputs.
	SourceBytes int64 `json:"source_bytes"`
	// Position is the source row the next run would start at
	// (SkipRows + Rows): its --skip-rows.
	Position int64 `json:"position"`
	// Load is the time the load took, Publish the publish's (zero with
	// NoPublish).
	Load      time.Duration `json:"-"`
	Publish   time.Duration `json:"-"`
	Published bool          `json:"published"`
}

// IngestError is an Ingest that stopped partway: what landed (every row
// before At, exactly once, with dense offsets), where it stopped and why.
// Rows of the refused batch took no offsets, so the next run or publish
// takes the very next one.
type IngestError struct {
	Ingested
	At  source.Location // where the source stopped (for a refusal, the refused row)
	Err error
	// Refused: the source's data was refused (Err wraps a
	// *source.RefusedError); otherwise the failure is not the data's.
	Refused bool
	// PublishFailed: every row landed, and only publishing failed; the
	// rows stay loaded and need publishing, not loading again.
	PublishFailed bool
}

func (e *IngestError) Error() string { return e.Err.Error() }
func (e *IngestError) Unwrap() error { return e.Err }

// ErrUnfinishedIngest is wrapped by the refusal to start a load while the
// log records that the last one stopped partway, unless the caller says
// which row to start from.
var ErrUnfinishedIngest = errors.New("the last ingest into the log stopped partway")

// ErrIngested is wrapped by the refusal to load again, without
// SkipRowsGiven, the very source (same files, sizes and times) the last
// ingest loaded in full: a rerun after a kill that came once it had
// finished.
var ErrIngested = errors.New("this source is loaded already")

// fingerprint names a source by its files' paths, sizes and modification
// times; "" when one input is stdin (a pipe is never the same twice).
func fingerprint(inputs []source.Input) string {
	var b strings.Builder
	for _, in := range inputs {
		if in.Path == "-" {
			return ""
		}
		abs, err := filepath.Abs(in.Path)
		if err != nil {
			abs = in.Path
		}
		st, err := os.Stat(in.Path)
		if err != nil {
			return ""
		}
		fmt.Fprintf(&b, "%s\x00%d\x00%d\x00", abs, st.Size(), st.ModTime().UnixNano())
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:16])
}

// Ingest loads a source into the stream's current log, offline: it takes
// the log's writer lock (naming the server's pid when it runs), starts a
// stream that exists nowhere from IngestOptions.First as serve would
// (never over history: a stream whose home is gone while its published
// copy survives is refused, naming restore, I8), refuses a retired stream
// with its retirement's numbers, seals what a previous server left in the
// buffer, then writes the source straight to files with the next offsets
// (logstore's Ingest) and, unless NoPublish, publishes every row with a
// flush. A failure returns *IngestError.
func Ingest(ctx context.Context, s Stream, o IngestOptions) (*Ingested, error) {
	const what = "ingest"
	t0 := time.Now()
	ses, err := resolveOrCreate(ctx, s, o.Options, what, o.First)
	if err != nil {
		return nil, err
	}
	defer ses.close()
	md := ses.md
	if md.Retired() {
		return nil, retiredError(md, what)
	}
	if md.Intent != nil {
		return nil, pendingError(md, what)
	}
	if ses.lg == nil {
		if err := ses.openCurrent(what); err != nil {
			return nil, err
		}
	}
	lg := ses.lg
	out := &Ingested{Stream: s.Name, Log: md.Current().Name}
	fp := fingerprint(o.Inputs)
	m, marked, err := lg.ReadIngestMark(ctx)
	switch {
	case err != nil:
		return nil, err
	case marked && !m.Done && !o.SkipRowsGiven:
		same := "another source"
		if fp != "" && m.Source == fp {
			same = "this same source"
		}
		return nil, fmt.Errorf("%s stream %q: the last ingest into its log %s (%s) stopped after %d rows of its source had landed (offsets [%d,%d)): %w; "+
			"to load the rest of that source, run the same ingest with --skip-rows %d; to load a source from its first row anyway, give --skip-rows 0",
			what, s.Name, lg.Dir(), same, m.Position, m.Start, m.End, ErrUnfinishedIngest, m.Position)
	case marked && m.Done && fp != "" && m.Source == fp && !o.SkipRowsGiven:
		return nil, fmt.Errorf("%s stream %q: these files, unchanged, were loaded in full by the last ingest, at offsets [%d,%d): %w; "+
			"loading them again would hold their rows twice. To load them again anyway, give --skip-rows 0",
			what, s.Name, m.Start, m.End, ErrIngested)
	}
	if marked && !m.Done && o.SkipRows == 0 {
		if err := lg.ClearIngestMark(ctx); err != nil {
			return nil, err
		}
	}
	sealed, err := lg.Seal(ctx, true)
	if err != nil {
		return nil, ses.maintainErr(what, err)
	}
	out.Sealed = sealed
	o.after(StepSealed)

	// A read of a quiet pipe blocks in the kernel; stdin that takes a
	// deadline (see ndjson.Interruptible) is woken when ctx ends.
	if d, ok := o.Stdin.(interface{ SetReadDeadline(time.Time) error }); ok {
		stop := context.AfterFunc(ctx, func() { _ = d.SetReadDeadline(time.Now()) })
		defer stop()
	}
	src, err := source.Open(lg.Schema(), o.Inputs, source.Options{Stdin: o.Stdin, SkipRows: o.SkipRows})
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	defer src.Close()
	var lo logstore.IngestOptions
	lo.Position = o.SkipRows
	lo.Source = fp
	if o.Progress != nil {
		lo.Progress = func(p logstore.IngestProgress) {
			o.Progress(IngestProgress{Rows: p.Taken, Landed: p.Recorded, Files: p.Files, BytesRead: src.BytesRead(), SourceSize: src.Size()})
		}
	}
	res, lerr := lg.Ingest(ctx, src, lo)
	out.Rows, out.Files, out.FileBytes, out.Start, out.End, out.Position = res.Rows, res.Files, res.FileBytes, res.Start, res.End, res.Position
	out.SourceBytes = src.BytesRead()
	out.Load = time.Since(t0)
	if lerr != nil {
		var re *source.RefusedError
		refused := errors.As(lerr, &re)
		// A refusal names the refused row; any other failure stops at the
		// first row that did not land (the reader may have read ahead).
		at := src.Where()
		if !refused {
			at = src.Locate(res.Position)
		}
		if errors.Is(lerr, context.Canceled) {
			lerr = fmt.Errorf("interrupted before the end of the source: %w", lerr)
		}
		return out, &IngestError{Ingested: *out, At: at, Err: fmt.Errorf("%s stream %q: %w", what, s.Name, lerr), Refused: refused}
	}
	if o.NoPublish {
		return out, nil
	}
	t1 := time.Now()
	if _, err := lg.PublishAll(ctx); err != nil {
		out.Publish = time.Since(t1)
		return out, &IngestError{Ingested: *out, PublishFailed: true,
			Err: fmt.Errorf("%s stream %q: all %d rows are loaded (offsets [%d,%d)), but publishing them failed: %w; do not ingest them again: "+
				"start the server (`streamcast serve` publishes them within flush_every + publish_every) or run `streamcast maintain --role publish --flush-every 1s --log %s` until they are published",
				what, s.Name, out.Rows, out.Start, out.End, err, lg.Dir())}
	}
	out.Publish = time.Since(t1)
	out.Published = true
	o.after(StepPublished)
	return out, nil
}

package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
)

// The kinds of intent this package records in the stream's metadata.
const (
	KindMigrate = "migrate"
	KindRetire  = "retire"
)

// The steps Options.AfterStep is called after, in the order they run.
// Migrate runs all but none of them twice; Retire skips StepCreated and
// StepMarks.
const (
	StepIntent    = "intent"    // the intent is committed in the metadata
	StepSealed    = "sealed"    // every buffered row is in a file
	StepPublished = "published" // the published table holds every row
	StepFenced    = "fenced"    // the log takes no more rows, for good
	StepCreated   = "created"   // migrate: the next log exists, empty, from the seam
	StepMarks     = "marks"     // migrate: the exactly-once marks are in the next log
	StepCommitted = "committed" // the metadata version that ends the operation is committed
)

// ErrRetired is wrapped by the refusal to migrate a retired stream.
var ErrRetired = errors.New("the stream is retired")

// ErrNoLog is wrapped by the refusal of a stream that has no log yet.
var ErrNoLog = errors.New("the stream has no log yet")

// ErrPending is wrapped by the refusal to start one operation while
// another one's intent is recorded.
var ErrPending = errors.New("another operation on the stream is under way")

// Stream is where a stream lives: the root's layout, how to reach an
// s3:// published prefix (credentials come from the AWS environment
// only), and its name.
type Stream struct {
	Layout meta.Layout
	S3     warehouse.S3
	Name   string
}

// Options are the knobs of Migrate and Retire; the zero value is what the
// command runs with.
type Options struct {
	// Clock stamps the retirement and the logs' records; nil is the
	// system clock.
	Clock logstore.Clock
	// AfterStep, when set, is called after each step (the Step*
	// constants) completes: tests stop the process there, as a crash
	// would.
	AfterStep func(step string)
	// Current, when set, is the stream's current log already open as the
	// Writer by the caller, which keeps it and closes it: serve's own
	// handle during an online migration, its committer stopped and its
	// writes fenced. The operation works through it instead of closing
	// and reopening the log, which costs two WAL checkpoints, disk
	// flushes every other stream's commits queue behind. A log that is
	// not the current one by the metadata is ignored (and then locks the
	// operation out, as any other writer does).
	Current *logstore.Log
	// KeepNext makes Migrate hand the log it moved the stream to, open as
	// the Writer, to the caller (Migration.Log), which serves it and
	// closes it: serve taking over the new log instead of closing and
	// reopening it saves the checkpoints of its close and of its open's
	// reads, disk flushes the other streams' commits queue behind.
	KeepNext bool
	// NextOptions are the options the next log is created or opened with,
	// after the clock: those of the caller that keeps it (serve's idle
	// close, its replicated WAL).
	NextOptions []logstore.Option
}

func (o Options) after(step string) {
	if o.AfterStep != nil {
		o.AfterStep(step)
	}
}

// Timings split an operation's time by step.
type Timings struct {
	Seal     time.Duration // sealing every buffered row into files
	Publish  time.Duration // publishing every file
	Fence    time.Duration // fencing the log
	Create   time.Duration // migrate: creating the next log
	Marks    time.Duration // migrate: carrying the exactly-once marks
	Metadata time.Duration // resolving the stream and committing its intent and result
}

// session is one run of an operation on a stream: its metadata store,
// the version it works from, and its current log once opened.
type session struct {
	s     Stream
	o     Options
	store *meta.Store
	md    *meta.Metadata
	lg    *logstore.Log // the current log, open as the Writer; nil until openCurrent
	lent  bool          // lg is Options.Current: the caller closes it
}

// resolve finds the stream's current metadata (meta.Resolve: adopting,
// upgrading or refusing, never minting over what exists, I8). A stream
// with nothing anywhere has no log to work on.
func resolve(ctx context.Context, s Stream, o Options, what string) (*session, error) {
	return resolveOrCreate(ctx, s, o, what, nil)
}

// resolveOrCreate is resolve, except that a stream with nothing anywhere
// gets its first log from first, when set, as serve would make it
// (CreateFirst); the session then holds that log, open as the Writer.
func resolveOrCreate(ctx context.Context, s Stream, o Options, what string, first *First) (*session, error) {
	store, err := meta.NewStore(ctx, s.Layout, s.Name, s.S3)
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	res, err := meta.Resolve(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	if res.Metadata == nil && first != nil {
		lg, md, err := CreateFirst(ctx, store, s, first.Declaration, first.Guard, logstore.WithClock(o.Clock))
		if err != nil {
			return nil, fmt.Errorf("%s %w", what, err)
		}
		return &session{s: s, o: o, store: store, md: md, lg: lg}, nil
	}
	if res.Metadata == nil {
		return nil, fmt.Errorf("%s stream %q: its home %s and %s hold nothing of it: %w; serve creates its first log from the config, and there is nothing to %s before that",
			what, s.Name, s.Layout.StreamDir(s.Name), store.PublishedURI(), ErrNoLog, what)
	}
	if res.Metadata.Current() == nil {
		return nil, fmt.Errorf("%s stream %q: its metadata %s (version %d) names no log; restore the stream's home directory from a backup",
			what, s.Name, store.HomeURI(), res.Metadata.Version)
	}
	return &session{s: s, o: o, store: store, md: res.Metadata}, nil
}

// openCurrent opens the current log as the Writer: the lock makes the
// operation offline (I7). It refuses a log that is not the one the
// metadata names, or that publishes under another prefix than the
// layout's (the metadata and the next log would go elsewhere).
func (ses *session) openCurrent(what string) error {
	cur := ses.md.Current()
	dir := ses.s.Layout.LogDir(ses.s.Name, cur.Name)
	if lg := ses.o.Current; lg != nil && filepath.Clean(lg.Dir()) == filepath.Clean(dir) {
		return ses.checkCurrent(what, dir, lg, true)
	}
	lg, err := logstore.Open(dir, logstore.Writer, logstore.WithClock(ses.o.Clock), logstore.WithNames(ses.s.Name, cur.Name))
	var locked *logstore.LockedError
	switch {
	case errors.As(err, &locked):
		holder := "another process"
		if locked.PID > 0 {
			holder = fmt.Sprintf("pid %d", locked.PID)
		}
		return fmt.Errorf("%s stream %q: %s runs with the server stopped, but its log %s is open for writing by %s (lock file %s); stop `streamcast serve` (or that process) and run it again",
			what, ses.s.Name, what, dir, holder, locked.Path)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s stream %q: its metadata (version %d) names log %s as current, but %s holds no log; restore that directory from a backup",
			what, ses.s.Name, ses.md.Version, cur.Name, dir)
	case err != nil:
		return fmt.Errorf("%s stream %q: %w", what, ses.s.Name, err)
	}
	return ses.checkCurrent(what, dir, lg, false)
}

// checkCurrent refuses lg, the log in dir, unless the metadata names it
// live and it publishes under the layout's prefix, and makes it the
// session's log. A lent log (Options.Current) is left open for its owner.
func (ses *session) checkCurrent(what, dir string, lg *logstore.Log, lent bool) error {
	drop := func() {
		if !lent {
			_ = lg.Close()
		}
	}
	if err := ses.md.CheckLive(lg); err != nil {
		drop()
		return fmt.Errorf("%s: %w", what, err)
	}
	have, err := lg.Config().PublishedPrefix(dir)
	if err != nil {
		drop()
		return fmt.Errorf("%s stream %q: %w", what, ses.s.Name, err)
	}
	if want := ses.s.Layout.Published(); have != want {
		drop()
		return fmt.Errorf("%s stream %q: its log %s publishes to %s, but the config's published prefix is %s; a stream's logs and metadata publish under one prefix, so set published back to %s",
			what, ses.s.Name, dir, have, want, have)
	}
	ses.lg, ses.lent = lg, lent
	return nil
}

func (ses *session) close() {
	if ses.lg != nil && !ses.lent {
		_ = ses.lg.Close()
	}
	ses.lg = nil
}

// maxAttempts bounds the retries of a metadata commit that lost its race
// to another writer (retain runs beside the server and may commit).
const maxAttempts = 10

// errDone is returned by an edit that finds its change already made.
var errDone = errors.New("already committed")

// update commits the change edit makes to the stream's current metadata
// (Clone, edit, Commit), and on a lost race (meta.ErrConflict) resolves
// again and edits the winner's version. An edit returning errDone finds
// its change made and commits nothing.
func (ses *session) update(ctx context.Context, edit func(m *meta.Metadata) error) error {
	m := ses.md
	for attempt := 1; ; attempt++ {
		next := m.Clone()
		if err := edit(next); errors.Is(err, errDone) {
			ses.md = m
			return nil
		} else if err != nil {
			return err
		}
		got, err := ses.store.Commit(ctx, next)
		if err == nil {
			ses.md = got
			return nil
		}
		if !errors.Is(err, meta.ErrConflict) || attempt == maxAttempts {
			return err
		}
		res, err := meta.Resolve(ctx, ses.store)
		if err != nil {
			return err
		}
		m = res.Metadata
	}
}

// recordIntent commits the intent of a kind operation (its plan) before
// its first step, on the stream whose current log is log. Another
// operation's pending intent refuses it, and so does a current log another
// process changed meanwhile; retired answers a stream found retired.
func (ses *session) recordIntent(ctx context.Context, what, kind string, plan any, log string, retired func(*meta.Metadata) error) error {
	in, err := meta.NewIntent(kind, plan)
	if err != nil {
		return err
	}
	err = ses.update(ctx, func(m *meta.Metadata) error {
		switch {
		case m.Intent != nil:
			return pendingError(m, what)
		case m.Retired():
			return retired(m)
		case m.Current().Name != log:
			return fmt.Errorf("another process made %s the current log meanwhile; run %s again", m.Current().Name, kind)
		}
		m.Intent = in
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s stream %q: record the intent: %w", what, ses.s.Name, err)
	}
	return nil
}

// finish seals and publishes every row of the current log, then fences
// it, and returns its end: the seam a successor starts at, or the end a
// retirement records. Each part is idempotent, so a rerun after a crash
// at any point gets the same end.
func (ses *session) finish(ctx context.Context, what string, t *Timings) (int64, error) {
	lg := ses.lg
	t0 := time.Now()
	if _, err := lg.Seal(ctx, true); err != nil {
		return 0, ses.maintainErr(what, err)
	}
	t.Seal += time.Since(t0)
	ses.o.after(StepSealed)
	t0 = time.Now()
	end, err := lg.PublishAll(ctx)
	if err != nil {
		return 0, ses.maintainErr(what, err)
	}
	t.Publish += time.Since(t0)
	ses.o.after(StepPublished)
	t0 = time.Now()
	fenced, err := lg.Fence(ctx)
	if err != nil {
		return 0, fmt.Errorf("%s stream %q: %w", what, ses.s.Name, err)
	}
	if fenced != end {
		// Only this handle appends (it holds the lock), so the end cannot
		// have moved; if it did, publish what lies past the first read.
		if end, err = lg.PublishAll(ctx); err != nil {
			return 0, ses.maintainErr(what, err)
		}
		if end != fenced {
			return 0, fmt.Errorf("%s stream %q: its log %s was fenced at %d but holds rows up to %d: %w", what, ses.s.Name, lg.Dir(), fenced, end, logstore.ErrCorrupt)
		}
	}
	t.Fence += time.Since(t0)
	ses.o.after(StepFenced)
	return fenced, nil
}

func (ses *session) maintainErr(what string, err error) error {
	if errors.Is(err, logstore.ErrBusy) {
		return fmt.Errorf("%s stream %q: a maintenance process is working on its log %s; stop it (`streamcast maintain` run by hand) and run %s again: %w",
			what, ses.s.Name, ses.lg.Dir(), what, err)
	}
	return fmt.Errorf("%s stream %q: %w", what, ses.s.Name, err)
}

// retiredError refuses what would give the retired stream of m rows or a
// successor log.
func retiredError(m *meta.Metadata, what string) error {
	r := m.Retirement
	return fmt.Errorf("%s stream %q: it was retired at %s, ending at offset %d (metadata version %d): %w; a retired stream gets no successor log, "+
		"since its consumers hold %d as its end. To take rows again, run `streamcast restore --revive %s` (server stopped), which continues it on a new log from that end",
		what, m.Stream, formatMicros(r.At), r.EndOffset, m.Version, ErrRetired, r.EndOffset, m.Stream)
}

// pendingError refuses to start what while another operation's intent
// is recorded.
func pendingError(m *meta.Metadata, what string) error {
	return fmt.Errorf("%s stream %q: a %s of it was interrupted (its intent is recorded in metadata version %d): %w; run `streamcast %s %s` to finish it first",
		what, m.Stream, m.Intent.Kind, m.Version, ErrPending, m.Intent.Kind, m.Stream)
}

// formatMicros spells µs since the epoch as RFC 3339, UTC.
func formatMicros(us int64) string {
	return time.UnixMicro(us).UTC().Format(time.RFC3339Nano)
}

package meta

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
)

// commitTries bounds the compare-and-swap retries of one change: each
// lost race means another writer committed in between, which is rare;
// this many in a row means something keeps writing, and the caller hears
// of it instead of spinning.
const commitTries = 8

// SetMaxAge records the stream's retention window, maxAge as ParseMaxAge
// reads it, or MaxAgeNone to keep every row from now on (what retention
// already deleted stays deleted: the floor stays). It is a metadata
// commit, so it works whether the server runs or not; the retention pass
// (Retain) reads the window on its next pass. It resolves the stream
// first (I8) and retries a lost compare-and-swap. It returns the current
// version and whether this call changed it (an unchanged window writes
// nothing).
func SetMaxAge(ctx context.Context, st *Store, maxAge string) (*Metadata, bool, error) {
	want, err := checkMaxAge(maxAge)
	if err != nil {
		return nil, false, err
	}
	for try := 1; ; try++ {
		res, err := Resolve(ctx, st)
		if err != nil {
			return nil, false, err
		}
		m := res.Metadata
		if m == nil {
			return nil, false, fmt.Errorf("stream %q has no logs and no metadata under %s or %s; a window is set on a stream that exists: start serve with the stream in its config first",
				st.stream, st.lay.StreamDir(st.stream), st.pubDirURI())
		}
		if eqPtr(m.Retention.MaxAge, want) {
			return m, false, nil
		}
		next := m.Clone()
		next.Retention.MaxAge = want
		w, err := st.Commit(ctx, next)
		if errors.Is(err, ErrConflict) && try < commitTries {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("stream %q: record max age %s: %w", st.stream, orNone(maxAgeText(want)), err)
		}
		return w, true, nil
	}
}

func maxAgeText(p *string) string {
	if p == nil {
		return MaxAgeNone
	}
	return *p
}

func eqPtr[T comparable](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// RetainOptions tunes Retain.
type RetainOptions struct {
	// Clock tells the time: the cutoff (now − max age) and when a pending
	// deletion's grace is over. nil is the system clock. Logs Retain opens
	// itself get it too.
	Clock logstore.Clock
	// Grace is how long rows below a newly published floor stay before
	// they are deleted; 0 means Live's retention grace (Policy), or
	// logstore.DefaultRetentionGrace without Live.
	Grace time.Duration
	// Live is the stream's current log as the caller holds it open (the
	// retain role's handle, a Maintainer); nil opens it here. Retain never
	// closes it.
	Live *logstore.Log
}

// Retained is what one retention pass did.
type Retained struct {
	// Floor is the stream's floor after the pass; 0 when it has none.
	Floor int64
	// Moved reports that the pass published a new floor.
	Moved bool
	// Deleted sums what the pass deleted below the floor.
	Deleted logstore.Deleted
	// Pending is how many deletions wait for their grace after the pass.
	Pending int
}

// Taken returns how much the pass took out: rows from the buffer, plus
// local and published files.
func (r Retained) Taken() int64 {
	return r.Deleted.BufferedRows + r.Deleted.LocalFiles + r.Deleted.PublishedFiles
}

// Retain runs one retention pass over the stream of st, every log of it
// (sealed and retired ones included), reading the window afresh from the
// metadata each time, so a `retain` takes effect at the next pass with no
// restart. Its halves:
//
//  1. Publish the floor: the smallest offset that may hold a row whose
//     streamcast_ts is newer than now − max age (logstore.FloorFor, log by
//     log, oldest first). A floor above the one recorded is committed in a
//     new metadata version, published copy first, together with a pending
//     deletion per log it moved into (not before now + grace); then each
//     log's own floor is raised (logstore.SetFloor), so the server that
//     writes the live log refuses below it at its next subscribe
//     (4416 evicted, earliest = the floor).
//  2. Delete what waited its grace: each pending deletion whose time has
//     come runs logstore.DeleteBelow on its log and leaves the metadata.
//     A file that straddles the floor stays until a later floor passes
//     it; a file DeleteBelow leaves for now (not yet published, or busy)
//     goes at the pass after the floor next moves.
//
// The pending deletions live in the metadata, so a restart between the
// halves loses nothing: the next pass finds them. A pass cut short
// between its commit and SetFloor is repaired by the next, which raises
// every log to the recorded floor before anything else. A log whose role
// locks another process holds (logstore.ErrBusy) keeps its deletion for
// the next pass. A stream without a window (MaxAgeNone) only finishes the
// deletions already pending: its floor never moves again.
func Retain(ctx context.Context, st *Store, opts RetainOptions) (Retained, error) {
	var out Retained
	now := opts.Clock.Now()
	res, err := Resolve(ctx, st)
	if err != nil {
		return out, err
	}
	m := res.Metadata
	if m == nil {
		return out, fmt.Errorf("stream %q has no metadata yet: nothing to retain", st.stream)
	}
	if m.Retention.MaxAge == nil && m.Retention.Floor == nil && len(m.Retention.PendingDeletions) == 0 {
		return out, nil // never retained: the metadata read was the whole pass
	}
	logs := &logSet{lay: st.lay, stream: st.stream, clock: opts.Clock, live: opts.Live, open: map[string]*logstore.Log{}}
	defer logs.close()
	grace := opts.Grace
	if grace <= 0 && opts.Live != nil {
		grace = opts.Live.Policy().RetentionGrace
	}
	if grace <= 0 {
		grace = logstore.DefaultRetentionGrace // never no grace at all
	}

	ends, err := logs.ends(ctx, m)
	if err != nil {
		return out, err
	}
	if err := logs.applyFloor(ctx, m, ends); err != nil {
		return out, err
	}
	if m, err = deleteDue(ctx, st, m, logs, now, &out); err != nil {
		return out, err
	}
	if m.Retention.MaxAge != nil {
		age, err := ParseMaxAge(*m.Retention.MaxAge)
		if err != nil {
			return out, fmt.Errorf("stream %q: its metadata (version %d) holds max_age %q: %w; set it again with retain", st.stream, m.Version, *m.Retention.MaxAge, err)
		}
		if m, err = publishFloor(ctx, st, m, logs, now.Add(-age).UnixMicro(), dueAfter(now, grace), &out); err != nil {
			return out, err
		}
	}
	if m.Retention.Floor != nil {
		out.Floor = *m.Retention.Floor
	}
	out.Pending = len(m.Retention.PendingDeletions)
	return out, nil
}

// RetainLog runs Retain for the stream whose current log is lg, as the
// retain maintenance role does, given only lg's directory. The stream is
// the one lg stores (Log.Names), never its directory's name; the root is
// where lg sits, the directory above its home, and lg must sit in the home
// the layout gives its stream there, or the pass is refused rather than
// run on another stream's metadata. The published prefix and S3 settings
// are the ones lg stores (with this process's overrides). Its own options'
// Live is lg.
func RetainLog(ctx context.Context, lg *logstore.Log, opts RetainOptions) (Retained, error) {
	stream, _, err := lg.Names()
	if err != nil {
		return Retained{}, fmt.Errorf("retain the stream of log %s: %w", lg.Dir(), err)
	}
	home := filepath.Dir(lg.Dir())
	cfg := lg.Policy()
	p, err := cfg.PublishedPrefix(lg.Dir())
	if err != nil {
		return Retained{}, fmt.Errorf("retain the stream of log %s: %w", lg.Dir(), err)
	}
	lay, err := NewLayout(filepath.Dir(home), p.String())
	if err != nil {
		return Retained{}, fmt.Errorf("retain the stream of log %s: %w", lg.Dir(), err)
	}
	if want := lay.StreamDir(stream); filepath.Clean(want) != filepath.Clean(home) {
		return Retained{}, fmt.Errorf("retain the stream of log %s: the log belongs to stream %q (the names it stores), whose home is %s, but it sits in %s; "+
			"a pass runs on the metadata of the stream its log names, never of the directory it sits in: move the log back into %s",
			lg.Dir(), stream, want, home, want)
	}
	st, err := NewStore(ctx, lay, stream, cfg.S3)
	if err != nil {
		return Retained{}, err
	}
	opts.Live = lg
	return Retain(ctx, st, opts)
}

// publishFloor commits the floor for cutoff (µs) when it is above the one
// m records, with a pending deletion (due at due, µs) for each log it
// moved into, retrying a lost compare-and-swap from a fresh read, then
// raises each log to it.
func publishFloor(ctx context.Context, st *Store, m *Metadata, logs *logSet, cutoff, due int64, out *Retained) (*Metadata, error) {
	for try := 1; ; try++ {
		ends, err := logs.ends(ctx, m)
		if err != nil {
			return m, err
		}
		old := floorOf(m)
		floor, err := logs.floorFor(ctx, m, ends, old, cutoff)
		if err != nil {
			return m, err
		}
		if floor <= old {
			return m, nil
		}
		next := m.Clone()
		next.Retention.Floor = &floor
		if err := logs.rollUp(ctx, next); err != nil {
			return m, err
		}
		for i, lg := range m.Logs {
			if below := clampTo(floor, lg.StartOffset, ends[i]); below > clampTo(old, lg.StartOffset, ends[i]) {
				next.Retention.PendingDeletions = addPending(next.Retention.PendingDeletions, PendingDeletion{Log: lg.Name, Below: below, NotBefore: due})
			}
		}
		w, err := st.Commit(ctx, next)
		if errors.Is(err, ErrConflict) && try < commitTries {
			res, rerr := Resolve(ctx, st)
			if rerr != nil {
				return m, rerr
			}
			m = res.Metadata
			continue
		}
		if err != nil {
			return m, fmt.Errorf("stream %q: publish the retention floor %d: %w", st.stream, floor, err)
		}
		out.Moved = true
		// The published copy names the floor now; the logs follow, so the
		// server refuses below it from its next subscribe on. A crash here
		// is repaired by the next pass (applyFloor).
		return w, logs.applyFloor(ctx, w, ends)
	}
}

// dueAfter is when rows hidden at now may go: now + grace, rounded up to
// a multiple of a quarter of the grace, so that the floor moves of one
// quarter share one pending deletion per log (addPending) and the
// metadata keeps a handful of them however often the pass runs. Rounding
// up only lengthens a grace.
func dueAfter(now time.Time, grace time.Duration) int64 {
	due := now.Add(grace).UnixMicro()
	if q := (grace / 4).Microseconds(); q > 0 {
		due = (due + q - 1) / q * q
	}
	return due
}

// addPending adds pd to pending, merged into the deletion of the same log
// due at the same time (the later floor covers the earlier).
func addPending(pending []PendingDeletion, pd PendingDeletion) []PendingDeletion {
	for i, p := range pending {
		if p.Log == pd.Log && p.NotBefore == pd.NotBefore {
			pending[i].Below = max(p.Below, pd.Below)
			return pending
		}
	}
	return append(pending, pd)
}

// deleteDue runs the pending deletions of m whose grace is over at now
// and commits m without those that ran.
func deleteDue(ctx context.Context, st *Store, m *Metadata, logs *logSet, now time.Time, out *Retained) (*Metadata, error) {
	var done []PendingDeletion
	var firstErr error
	for _, pd := range m.Retention.PendingDeletions {
		if pd.NotBefore > now.UnixMicro() {
			continue
		}
		lg, err := logs.get(pd.Log)
		if err == nil {
			var d logstore.Deleted
			d, err = lg.DeleteBelow(ctx, pd.Below)
			out.Deleted.BufferedRows += d.BufferedRows
			out.Deleted.LocalFiles += d.LocalFiles
			out.Deleted.PublishedFiles += d.PublishedFiles
		}
		switch {
		case err == nil:
			done = append(done, pd)
		case errors.Is(err, logstore.ErrBusy):
			// Another role holds the log's locks: the next pass retries.
		case firstErr == nil:
			firstErr = fmt.Errorf("stream %q: delete below %d in log %s: %w", st.stream, pd.Below, pd.Log, err)
		}
	}
	if len(done) == 0 {
		return m, firstErr
	}
	for try := 1; ; try++ {
		next := m.Clone()
		next.Retention.PendingDeletions = slices.DeleteFunc(next.Retention.PendingDeletions, func(pd PendingDeletion) bool {
			return slices.Contains(done, pd)
		})
		w, err := st.Commit(ctx, next)
		if errors.Is(err, ErrConflict) && try < commitTries {
			res, rerr := Resolve(ctx, st)
			if rerr != nil {
				return m, rerr
			}
			m = res.Metadata
			continue
		}
		if err != nil {
			return m, fmt.Errorf("stream %q: record %d finished deletion(s) below the floor: %w", st.stream, len(done), err)
		}
		return w, firstErr
	}
}

// floorOf is m's floor, 0 when none.
func floorOf(m *Metadata) int64 {
	if m.Retention.Floor == nil {
		return 0
	}
	return *m.Retention.Floor
}

// clampTo is f within [start, end]: a stream floor as one log's floor.
func clampTo(f, start, end int64) int64 {
	return min(max(f, start), end)
}

// logSet opens the logs of one stream a pass needs, once each, and closes
// those it opened.
type logSet struct {
	lay    Layout
	stream string
	clock  logstore.Clock
	live   *logstore.Log // the caller's; never closed here
	open   map[string]*logstore.Log
}

func (s *logSet) get(name string) (*logstore.Log, error) {
	dir := s.lay.LogDir(s.stream, name)
	if s.live != nil && filepath.Clean(s.live.Dir()) == filepath.Clean(dir) {
		return s.live, nil
	}
	if lg, ok := s.open[name]; ok {
		return lg, nil
	}
	lg, err := logstore.Open(dir, logstore.Maintainer, logstore.WithClock(s.clock), logstore.WithNames(s.stream, name))
	if err != nil {
		return nil, fmt.Errorf("stream %q: open its log %s for retention: %w", s.stream, name, err)
	}
	s.open[name] = lg
	return lg, nil
}

func (s *logSet) close() {
	for _, lg := range s.open {
		_ = lg.Close()
	}
}

// ends returns each log's end: the recorded end of a sealed or retired
// log, the current end of the live one.
func (s *logSet) ends(ctx context.Context, m *Metadata) ([]int64, error) {
	ends := make([]int64, len(m.Logs))
	for i, lg := range m.Logs {
		if lg.EndOffset != nil {
			ends[i] = *lg.EndOffset
			continue
		}
		l, err := s.get(lg.Name)
		if err != nil {
			return nil, err
		}
		if _, ends[i], err = l.Extent(ctx); err != nil {
			return nil, fmt.Errorf("stream %q: %w", s.stream, err)
		}
	}
	return ends, nil
}

// floorFor is the stream's floor for cutoff: in the oldest log holding a
// row that may be newer, that log's floor; past every log, the stream's
// end. Logs wholly below old (the floor recorded) are not opened.
func (s *logSet) floorFor(ctx context.Context, m *Metadata, ends []int64, old, cutoff int64) (int64, error) {
	floor := old
	for i, lg := range m.Logs {
		if ends[i] <= old {
			continue
		}
		l, err := s.get(lg.Name)
		if err != nil {
			return 0, err
		}
		f, err := l.FloorFor(ctx, cutoff)
		if err != nil {
			return 0, fmt.Errorf("stream %q: %w", s.stream, err)
		}
		if f < ends[i] {
			return max(f, old), nil
		}
		floor = ends[i]
	}
	return floor, nil
}

// rollUp refreshes next's statistics of each of its logs: a floor
// commit is the lifecycle step that changes what they hold.
func (s *logSet) rollUp(ctx context.Context, next *Metadata) error {
	for _, lg := range next.Logs {
		l, err := s.get(lg.Name)
		if err != nil {
			return err
		}
		if err := next.RollUp(ctx, lg.Name, l); err != nil {
			return err
		}
	}
	return nil
}

// applyFloor raises every log m holds rows of below its floor to it
// (clamped to the log); SetFloor never lowers one, so this is idempotent.
func (s *logSet) applyFloor(ctx context.Context, m *Metadata, ends []int64) error {
	floor := floorOf(m)
	if floor == 0 {
		return nil
	}
	for i, lg := range m.Logs {
		if i >= len(ends) || lg.StartOffset >= floor {
			continue
		}
		l, err := s.get(lg.Name)
		if err != nil {
			return err
		}
		if err := l.SetFloor(ctx, clampTo(floor, lg.StartOffset, ends[i])); err != nil {
			return fmt.Errorf("stream %q: %w", s.stream, err)
		}
	}
	return nil
}

// RollUp fills the statistics m keeps of its log named name, open as lg,
// from lg's tier records (logstore.Summary): first_ts and
// last_ts, and each column's min, max and null count when files hold every
// row (a live log with buffered rows gets none, since the buffer keeps no
// statistics). Rows below m's floor are not counted, except in a file
// straddling it, which counts whole. A null count is left unknown when some
// file predates null counts.
// A lifecycle step calls it on the version it is about to commit (the
// retention pass does; migrate and retire can when they seal a log),
// never the publish path. A log m does not name is an error.
func (m *Metadata) RollUp(ctx context.Context, name string, lg *logstore.Log) error {
	i := slices.IndexFunc(m.Logs, func(d Log) bool { return d.Name == name })
	if i < 0 {
		return fmt.Errorf("stream %q: roll up the statistics of log %s: the metadata (version %d) names no such log", m.Stream, name, m.Version)
	}
	s, err := lg.Summary(ctx, floorOf(m))
	if err != nil {
		return fmt.Errorf("stream %q: roll up the statistics of log %s: %w", m.Stream, name, err)
	}
	d := &m.Logs[i]
	d.FirstTS, d.LastTS = nil, nil
	if s.HasTS {
		d.FirstTS, d.LastTS = &s.FirstTS, &s.LastTS
	}
	d.Stats = make(map[string]ColumnStats, len(s.Stats))
	for col, mm := range s.Stats {
		d.Stats[col] = ColumnStats{Min: mm[0], Max: mm[1]}
	}
	for col, n := range s.Nulls {
		c := d.Stats[col]
		c.NullCount = &n
		d.Stats[col] = c
	}
	return nil
}

// checkMaxAge reads a retain command's --max-age: MaxAgeNone is nil (no
// window), anything else must parse (ParseMaxAge), exactly as given.
func checkMaxAge(s string) (*string, error) {
	if s == MaxAgeNone {
		return nil, nil
	}
	if _, err := ParseMaxAge(s); err != nil {
		return nil, err
	}
	return &s, nil
}

package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/streamcast/streamcast/internal/durable"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
)

// The fences a restore puts between the last offset it holds and the
// first it issues (docs/design.md §4.8). The lost writer may have
// acknowledged offsets past anything the replica or the table holds: at
// most a replication lag's worth past the replica, but up to a whole
// publish interval past the table, so the jump past the table is the
// larger one.
const (
	FenceReplica = int64(1) << 20 // past the replica's next offset, when it is at or past the table's end
	FenceTable   = int64(1) << 40 // past the table's end, without a replica or when the table is ahead of it
)

// The steps Restore calls Options.AfterStep after, in order.
const (
	StepMarker     = "marker"     // the marker is written in the stream's home
	StepDownloaded = "downloaded" // buffer.db is restored from the replica, or made afresh
	StepPlanned    = "planned"    // the fence and hole are recorded in the marker
	StepRebuilt    = "rebuilt"    // buffer.db's records match the table, the fence is in place
	StepOwned      = "owned"      // the published table names this log as its owner again
	StepRecorded   = "recorded"   // the metadata version recording it is committed; the marker is still there
)

// Where a restore takes its rows from.
const (
	FromReplica = "replica" // the WAL replica, then the published table
	FromTable   = "table"   // the published table alone
	FromRevive  = "revive"  // a retired stream continued on a new log (RestoreOptions.Revive)
)

// ErrRestoreRefused is wrapped by each of Restore's refusals.
var ErrRestoreRefused = errors.New("restore refused")

// RestoreOptions are the knobs of Restore beyond Options.
type RestoreOptions struct {
	Options
	// Log holds the settings a log made afresh (no replica) gets: its
	// file targets and S3 settings. Restore sets its names, start, sort
	// order and published prefix from the stream's metadata.
	Log logstore.Config
	// Replica is where the stream's WAL replica was shipped: the config's
	// replicate.destination. The zero Destination looks beside the
	// published tables, <prefix>/<stream>/_wal/<log>/.
	Replica replica.Destination
	// Revive continues a retired stream on its next log, from exactly
	// its retired end; without it a retired stream is refused.
	Revive bool
	// Progress, when set, is told each step as it starts (a terminal
	// shows it).
	Progress func(step string)
}

func (o RestoreOptions) progress(step string) {
	if o.Progress != nil {
		o.Progress(step)
	}
}

// Restored is what Restore did.
type Restored struct {
	Stream string
	Log    string
	// From is FromReplica or FromTable.
	From string
	// ReplicaAt is where Restore looked for the replica (an absolute
	// directory or an s3:// URL), whether it found one or not.
	ReplicaAt string
	// ReplicaEnd is R, the replica's next offset (0 without a replica);
	// PublishedEnd is P, the offset after the table's last.
	ReplicaEnd, PublishedEnd int64
	// Resume is the next offset the log issues; Hole is the range
	// [held end, Resume) recorded as skipped.
	Resume int64
	Hole   logstore.Span
	// Marks is the number of exactly-once marks the log holds.
	Marks int
	// Resumed: an interrupted restore was found and finished.
	Resumed bool
	// Version is the metadata version that records the restore.
	Version int
	// Timings split the time: Download (the replica), Rebuild (the table's
	// records and the fence), Metadata (the ownership and metadata commits).
	Download, Rebuild, Commit time.Duration
}

// restorePlan is the marker's content, written in the stream's home
// before anything else and completed as the steps learn it, so a rerun
// takes up exactly where a killed run stopped and never fences twice.
type restorePlan struct {
	Log    string `json:"log"`
	LogID  string `json:"log_id"`
	At     int64  `json:"at"`
	Token  string `json:"token"`
	From   string `json:"from,omitempty"` // set once downloaded
	R      int64  `json:"replica_end"`
	P      int64  `json:"published_end"`
	Resume int64  `json:"resume"` // set once planned
}

// markerFile is the restore's marker inside the stream's home.
const markerFile = "restore.json"

// Restore rebuilds the stream's current log on a machine whose root lacks
// it, from the config's published prefix (its metadata and its table)
// and, when there is one, its WAL replica (at o.Replica, see
// replica.Locate).
//
//  1. It refuses when the home holds the stream already, when the prefix
//     holds no metadata for it, when it is retired (revive it instead),
//     or when the replica holds another log than the metadata names.
//  2. It writes a marker in the stream's home (restore.json).
//  3. It restores buffer.db from the replica, or, without one, makes an
//     empty log with the lost log's id, start, schema and sort order.
//  4. It checks that every data file the table names is in storage with
//     the size the table records, and refuses, naming them, when not.
//  5. It fences: with R the replica's next offset and P the table's end,
//     the log resumes at P+2^40 when P > R, else R+2^20; without a
//     replica at P+2^40. The range skipped is a hole.
//  6. It rebuilds buffer.db's records: the old machine's local file
//     records, intents and delete queue go, the published records are
//     read from the table's manifests, buffered rows the table holds go,
//     and without a replica the marks come from the table's marks file.
//  7. It takes the table over with one property commit.
//  8. It commits the metadata version that records the restore and the
//     hole, then removes the marker: that commit is the restore's end.
//
// A restore killed at any step finishes when Restore runs again. The old
// writer must be stopped first: one that still runs keeps writing to its
// own buffer and may publish into the table (docs/design.md, restore).
func Restore(ctx context.Context, s Stream, o RestoreOptions) (*Restored, error) {
	const what = "restore"
	refuse := func(format string, args ...any) error {
		args = append(append([]any{what, s.Name}, args...), ErrRestoreRefused)
		return fmt.Errorf("%s stream %q: "+format+": %w", args...)
	}
	o.progress("reading the published metadata")
	store, err := meta.NewStore(ctx, s.Layout, s.Name, s.S3)
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	home := s.Layout.StreamDir(s.Name)
	marker := filepath.Join(home, markerFile)
	plan, resumed, err := readPlan(marker)
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	pub, err := store.LoadPublished(ctx)
	if errors.Is(err, meta.ErrNoMetadata) {
		return nil, refuse("%s holds no metadata for it, so there is nothing to restore from; check the config's published prefix (%s)", store.PublishedURI(), s.Layout.Published())
	}
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	if o.Revive && (pub.Retired() || plan.From == FromRevive) {
		return revive(ctx, s, o, store, pub, plan, resumed)
	}
	if pub.Retired() {
		return nil, refuse("it was retired at %s, ending at offset %d (metadata version %d): %w; a retired stream is brought back with --revive, which continues it on a new log from offset %d",
			formatMicros(pub.Retirement.At), pub.Retirement.EndOffset, pub.Version, ErrRetired, pub.Retirement.EndOffset)
	}
	if !resumed {
		if entries, err := os.ReadDir(home); err == nil && len(entries) > 0 {
			return nil, refuse("its home %s holds it already (%s, …); restore rebuilds a stream on a machine that lacks it: serve it from this root, or move %s away and run restore again",
				home, entries[0].Name(), home)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
		}
	}
	if resumed {
		if done, err := restoreCommitted(ctx, store, pub, plan, marker); done || err != nil {
			if err != nil {
				return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
			}
			out := restoredFrom(s.Name, plan, pub, true)
			out.ReplicaAt = replicaAt(s, o, plan.Log).String()
			return out, nil
		}
	}
	cur := pub.Current()
	switch {
	case cur == nil:
		return nil, refuse("its metadata %s (version %d) names no log", store.PublishedURI(), pub.Version)
	case pub.Intent != nil:
		return nil, refuse("its metadata version %d records an interrupted %s; finish it on the machine that ran it (`streamcast %s %s`), then restore", pub.Version, pub.Intent.Kind, pub.Intent.Kind, s.Name)
	case cur.LogID == "":
		return nil, refuse("its metadata (version %d) does not record the id of its log %s, so the table and replica cannot be checked against it", pub.Version, cur.Name)
	}
	if resumed && (plan.Log != cur.Name || plan.LogID != cur.LogID) {
		return nil, refuse("the marker %s restores log %s (id %s), but the metadata's current log is %s (id %s); move %s away and run restore again", marker, plan.Log, plan.LogID, cur.Name, cur.LogID, home)
	}
	res := &Restored{Stream: s.Name, Log: cur.Name, Resumed: resumed, ReplicaAt: replicaAt(s, o, cur.Name).String()}
	if !resumed {
		plan = restorePlan{Log: cur.Name, LogID: cur.LogID, At: o.Clock.Now().UnixMicro(), Token: logstore.NewToken()}
		if err := writePlan(marker, plan); err != nil {
			return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
		}
	}
	o.after(StepMarker)

	dir := s.Layout.LogDir(s.Name, cur.Name)
	t0 := time.Now()
	if plan.From == "" {
		o.progress("restoring buffer.db")
		if plan, err = download(ctx, s, o, cur, dir, plan); err != nil {
			if errors.Is(err, ErrRestoreRefused) {
				// Nothing of it is worth keeping: the home is ours.
				_ = os.RemoveAll(home)
			}
			return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
		}
		if err := writePlan(marker, plan); err != nil {
			return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
		}
	}
	res.Download = time.Since(t0)
	o.after(StepDownloaded)

	t0 = time.Now()
	o.progress("rebuilding the published records from the table")
	lg, err := logstore.Open(dir, logstore.Writer, logstore.WithClock(o.Clock))
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	defer lg.Close()
	pt, err := lg.PublishedTable()
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	tab, err := logstore.ReadTable(ctx, pt)
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: read the published table: %w", what, s.Name, err)
	}
	if tab.Exists && tab.LogID != cur.LogID {
		return nil, refuse("the table at %s belongs to log id %s, not %s as the metadata names", pt.Location(), tab.LogID, cur.LogID)
	}
	// The log adopts every file the table names as its published tier, and
	// serve replays from them: a missing one must stop the restore here,
	// not the first subscriber that reaches its offsets.
	o.progress("checking the table's data files")
	if err := logstore.CheckFiles(ctx, pt, tab.Files); err != nil {
		if fm := (*logstore.FilesMissing)(nil); errors.As(err, &fm) {
			return nil, refuse("%w; their rows cannot come back without them: put each file back at its location (from a backup, or a copy of the published prefix), then run restore again, which takes up where this one stopped", err)
		}
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	if plan.Resume == 0 {
		plan.P = tab.End(cur.StartOffset)
		plan.Resume = fence(plan.From == FromReplica, plan.P, plan.R)
		if err := writePlan(marker, plan); err != nil {
			return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
		}
	}
	o.after(StepPlanned)
	hole := logstore.Span{Start: heldEnd(plan), End: plan.Resume}
	rb := logstore.Rebase{LogID: cur.LogID, Published: tab.Files, Through: tab.Through, Resume: plan.Resume, Hole: hole}
	if plan.From == FromTable || plan.P > plan.R {
		// The table's marks are as of its end: without a replica they are
		// the only ones, and when the table is ahead of the replica they
		// are the later ones.
		rb.Marks = []logstore.Mark{}
		for _, m := range tab.Marks.Marks {
			rb.Marks = append(rb.Marks, logstore.Mark{Publisher: m.Publisher, LastSeq: m.LastSeq, LastOffset: m.LastOffset})
		}
	}
	if err := lg.ApplyRebase(ctx, rb); err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	marks, err := lg.Marks(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	res.Marks = len(marks)
	res.Rebuild = time.Since(t0)
	o.after(StepRebuilt)

	t0 = time.Now()
	o.progress("taking over the published table")
	if err := lg.TakeOver(ctx, plan.Token); err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	o.after(StepOwned)

	o.progress("committing the metadata")
	next := pub.Clone()
	h := meta.Hole{From: hole.Start, To: hole.End, Why: "restore from the " + plan.From + " past the lost writer's last possible offset", At: plan.At}
	c := next.Current()
	c.Holes = append(c.Holes, h)
	next.Restores = append(next.Restores, meta.Restore{At: plan.At, Log: cur.Name, From: plan.From, Hole: h})
	got, err := commitRestore(ctx, o.Options, store, next, marker)
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	o.after(StepCommitted)
	res.Commit = time.Since(t0)
	out := restoredFrom(s.Name, plan, got, resumed)
	out.Marks, out.Download, out.Rebuild, out.Commit, out.ReplicaAt = res.Marks, res.Download, res.Rebuild, res.Commit, res.ReplicaAt
	return out, nil
}

// fence returns the offset a restored log resumes at (docs/design.md
// §4.8): whichever copy ends later wins, and the jump past the table is
// the larger, since a table trails its writer by a publish interval.
func fence(fromReplica bool, p, r int64) int64 {
	if fromReplica && r >= p {
		return r + FenceReplica
	}
	return p + FenceTable
}

// heldEnd is the end of what the restored log holds: where the hole
// starts.
func heldEnd(p restorePlan) int64 {
	if p.From == FromReplica {
		return max(p.P, p.R)
	}
	return p.P
}

// replicaAt is where the replica of the stream's log lives by o.
func replicaAt(s Stream, o RestoreOptions, log string) warehouse.Location {
	return replica.Locate(o.Replica.Location, s.Layout.Published(), s.Name, log)
}

// download puts the log's buffer.db in dir: the replica's newest state
// when there is one (refused when it names another log), else an empty
// log with the lost one's id, start and shape.
func download(ctx context.Context, s Stream, o RestoreOptions, cur *meta.Log, dir string, plan restorePlan) (restorePlan, error) {
	// A killed earlier attempt may have left part of a log: start over.
	if err := os.RemoveAll(dir); err != nil {
		return plan, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return plan, err
	}
	at, s3cfg := replicaAt(s, o, cur.Name), s.S3
	if !o.Replica.Location.IsZero() {
		s3cfg = o.Replica.S3
	}
	client := replica.Client(at, s3cfg)
	has, err := replica.Exists(ctx, client)
	if err != nil {
		return plan, fmt.Errorf("look for the replica of log %s at %s: %w", cur.Name, at, err)
	}
	if has {
		if err := replica.Restore(ctx, client, dir); err != nil {
			return plan, err
		}
		lg, err := logstore.Open(dir, logstore.ReadOnly)
		if err != nil {
			return plan, fmt.Errorf("open the log restored from the replica: %w", err)
		}
		defer lg.Close()
		if lg.ID() != cur.LogID {
			return plan, fmt.Errorf("the replica at %s holds log id %s, but the metadata names log id %s: it is another log's history; move it away to restore from the table alone: %w",
				at, lg.ID(), cur.LogID, ErrRestoreRefused)
		}
		st, err := lg.Status(ctx)
		if err != nil {
			return plan, err
		}
		plan.From, plan.R = FromReplica, st.End
		return plan, durable.SyncDir(dir)
	}
	sch, err := planSchema(migratePlan{Schema: cur.Schema})
	if err != nil {
		return plan, fmt.Errorf("the schema the metadata records for log %s: %w", cur.Name, err)
	}
	if err := os.Remove(dir); err != nil {
		return plan, err
	}
	cfg := o.Log
	cfg.Stream, cfg.Log, cfg.Start, cfg.SortBy = s.Name, cur.Name, cur.StartOffset, orEmpty(cur.SortBy)
	cfg.Published = s.Layout.StoredPublished(s.Name, cur.Name)
	lg, err := logstore.Create(dir, sch, cfg, logstore.WithClock(o.Clock))
	if err != nil {
		return plan, err
	}
	plan.From = FromTable
	return plan, lg.Close()
}

// restoreCommitted reports whether the restore of plan is the published
// metadata's latest already (a run killed between the commit and the
// marker's removal), and then brings the home up to it and removes the
// marker.
func restoreCommitted(ctx context.Context, store *meta.Store, pub *meta.Metadata, plan restorePlan, marker string) (bool, error) {
	if plan.Resume == 0 || len(pub.Restores) == 0 {
		return false, nil
	}
	last := pub.Restores[len(pub.Restores)-1]
	if last.At != plan.At || last.Log != plan.Log {
		return false, nil
	}
	if err := store.Adopt(ctx, pub); err != nil && !errors.Is(err, meta.ErrConflict) {
		return false, err
	}
	return true, os.Remove(marker)
}

// commitRestore commits next, the version that records a restore or a
// revival (the operation's commit point), then removes its marker.
func commitRestore(ctx context.Context, o Options, store *meta.Store, next *meta.Metadata, marker string) (*meta.Metadata, error) {
	got, err := store.Commit(ctx, next)
	if err != nil {
		return nil, fmt.Errorf("record it in the metadata (run the command again to finish it): %w", err)
	}
	o.after(StepRecorded)
	return got, os.Remove(marker)
}

func restoredFrom(stream string, plan restorePlan, m *meta.Metadata, resumed bool) *Restored {
	return &Restored{
		Stream: stream, Log: plan.Log, From: plan.From, ReplicaEnd: plan.R, PublishedEnd: plan.P,
		Resume: plan.Resume, Hole: logstore.Span{Start: heldEnd(plan), End: plan.Resume},
		Resumed: resumed, Version: m.Version,
	}
}

// readPlan reads the marker; ok=false when there is none.
func readPlan(path string) (p restorePlan, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return p, false, nil
	}
	if err != nil {
		return p, false, err
	}
	if err := json.Unmarshal(b, &p); err != nil || p.Log == "" {
		return p, false, fmt.Errorf("the restore marker %s does not read (%v); move the stream's home away and run restore again", path, err)
	}
	return p, true, nil
}

// writePlan writes the marker durably (temp file, fsync, rename, fsync of
// the directory), so a crash leaves the old marker or the new one.
func writePlan(path string, p restorePlan) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(path))
}

package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/schema"
)

// Declaration is what the config declares of a stream now, the shape a
// migration's new log takes.
type Declaration struct {
	// Schema is the stream's schema (schema.Any for none).
	Schema *schema.Schema
	// Log holds the new log's settings: sort_by, S3 and tier settings.
	// Migrate sets its Stream, Log, Published (the layout's) and Start.
	Log logstore.Config
}

// Migration is what Migrate did.
type Migration struct {
	Stream string
	// From and To are the logs either side of the seam; both the current
	// log when the declaration was unchanged.
	From, To string
	// Seam is To's first offset: exactly From's end. For an unchanged
	// declaration it is the current log's start.
	Seam int64
	// Unchanged: the config declares what the current log holds, and
	// nothing was done.
	Unchanged bool
	// Resumed: an interrupted migration was found and finished (to the
	// schema its intent recorded).
	Resumed bool
	// Differs: after a resumed migration, the config declares yet
	// another schema or sort order; run Migrate again to move to it.
	Differs bool
	// Marks is the number of exactly-once marks carried into To.
	Marks int
	// Version is the metadata version that made To current.
	Version int
	// Log is To, open as the Writer, when Options.KeepNext asked for it
	// and the migration made or finished To (nil when Unchanged): the
	// caller owns it and closes it. It never crosses a process
	// (MigrateJob).
	Log     *logstore.Log `json:"-"`
	Timings Timings
}

// migratePlan is the migrate intent's fields: the log it leaves, the log
// it makes, and that log's declaration.
type migratePlan struct {
	From   string          `json:"from"`
	To     string          `json:"to"`
	Schema json.RawMessage `json:"schema"`
	SortBy []string        `json:"sort_by"`
}

// Migrate moves the stream to the declaration d, offline:
//
//  1. it records the intent (a "migrate" intent naming the next log and
//     its schema) in the stream's metadata;
//  2. it seals and publishes every row of the current log, then fences
//     it for good;
//  3. it creates the next log (meta.NextLogName) starting at exactly the
//     current log's end, the seam: no gap, no overlap (I1);
//  4. it carries the exactly-once marks into it;
//  5. it commits the metadata version that makes it current, the old log
//     sealed with its end, and clears the intent.
//
// Each step is idempotent and the intent says where a rerun resumes, so a
// migration killed at any step finishes when Migrate runs again.
//
// A declaration equal to the current log's (schema and sort_by) is a
// no-op (Unchanged). A column whose type differs from the type the stream
// ever declared for that name, even a removed one, is refused naming the
// column and both types; so is a retired stream (ErrRetired), also one
// whose retirement was only recovered by adopting the published
// metadata, and it is never given a successor log.
func Migrate(ctx context.Context, s Stream, d Declaration, o Options) (*Migration, error) {
	const what = "migrate"
	if d.Schema == nil {
		d.Schema = schema.Any()
	}
	t0 := time.Now()
	ses, err := resolve(ctx, s, o, what)
	if err != nil {
		return nil, err
	}
	defer ses.close()
	md := ses.md
	if md.Retired() {
		return nil, retiredError(md, what)
	}
	mig := &Migration{Stream: s.Name}
	want := migratePlan{Schema: declared(d.Schema), SortBy: orEmpty(d.Log.SortBy)}
	var plan migratePlan
	switch in := md.Intent; {
	case in != nil && in.Kind == KindMigrate:
		if err := in.Decode(&plan); err != nil || plan.To == "" || plan.From == "" {
			return nil, fmt.Errorf("%s stream %q: its metadata version %d records a migrate intent this streamcast cannot read (%v); restore a version from before it", what, s.Name, md.Version, err)
		}
		mig.Resumed = true
	case in != nil:
		return nil, pendingError(md, what)
	default:
		cur := md.Current()
		if sameDeclaration(cur, want) {
			mig.From, mig.To, mig.Seam, mig.Unchanged, mig.Version = cur.Name, cur.Name, cur.StartOffset, true, md.Version
			return mig, nil
		}
		// The types rule, before anything is written.
		if err := md.Clone().DeclareColumns(d.Schema); err != nil {
			return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
		}
		plan = want
		plan.From, plan.To = cur.Name, md.NextLogName()
	}
	mig.From, mig.To = plan.From, plan.To
	if cur := md.Current(); cur.Name != plan.From {
		return nil, fmt.Errorf("%s stream %q: its migrate intent (metadata version %d) leaves log %s, but the metadata's current log is %s; restore a version from before the intent",
			what, s.Name, md.Version, plan.From, cur.Name)
	}
	sch, err := planSchema(plan)
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: the schema its migrate intent records: %w", what, s.Name, err)
	}
	if err := ses.openCurrent(what); err != nil {
		return nil, err
	}
	if !mig.Resumed {
		retired := func(m *meta.Metadata) error { return retiredError(m, what) }
		if err := ses.recordIntent(ctx, what, KindMigrate, plan, plan.From, retired); err != nil {
			return nil, err
		}
	}
	mig.Timings.Metadata += time.Since(t0)
	o.after(StepIntent)

	seam, err := ses.finish(ctx, what, &mig.Timings)
	if err != nil {
		return nil, err
	}
	mig.Seam = seam

	t1 := time.Now()
	cfg := d.Log
	cfg.Stream, cfg.Log, cfg.Start = s.Name, plan.To, seam
	cfg.SortBy = plan.SortBy
	cfg.Published = s.Layout.StoredPublished(s.Name, plan.To)
	next, err := openNext(s.Layout.LogDir(s.Name, plan.To), sch, cfg, o)
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	kept := false
	defer func() {
		if !kept {
			_ = next.Close()
		}
	}()
	mig.Timings.Create = time.Since(t1)
	o.after(StepCreated)

	t1 = time.Now()
	marks, err := ses.lg.Marks(ctx)
	if err == nil && len(marks) > 0 {
		// A stream without marks skips the import: the next log was
		// made without any (a rerun finds it so too), and the import's
		// commit would be the first into the next log's WAL, three syncs.
		err = next.ImportMarks(ctx, marks)
	}
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: carry the exactly-once marks into %s: %w", what, s.Name, plan.To, err)
	}
	mig.Marks = len(marks)
	mig.Timings.Marks = time.Since(t1)
	o.after(StepMarks)

	t1 = time.Now()
	desc, err := meta.DescribeLog(next, seam)
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: %w", what, s.Name, err)
	}
	err = ses.update(ctx, func(m *meta.Metadata) error {
		if cur := m.Current(); cur.Name == plan.To && cur.LogID == desc.LogID {
			return errDone
		}
		if m.Intent == nil || m.Intent.Kind != KindMigrate || m.Current().Name != plan.From {
			return fmt.Errorf("the metadata changed under the migration (version %d no longer records its intent); run migrate again", m.Version)
		}
		old := &m.Logs[len(m.Logs)-1]
		old.State, old.EndOffset = meta.Sealed, &seam
		// The sealed log's stamps and column bounds are final now: its
		// files hold every row.
		if err := m.RollUp(ctx, plan.From, ses.lg); err != nil {
			return err
		}
		if err := m.AddLog(desc, sch); err != nil {
			return err
		}
		m.Intent = nil
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: make %s its current log: %w", what, s.Name, plan.To, err)
	}
	mig.Version = ses.md.Version
	mig.Timings.Metadata += time.Since(t1)
	o.after(StepCommitted)
	mig.Differs = mig.Resumed && !equalPlan(plan, want)
	if o.KeepNext {
		mig.Log, kept = next, true
	}
	return mig, nil
}

// openNext creates the migration's next log in dir, or opens the one a
// killed run created: it must start at the seam, hold no row and have the
// planned schema. What a Create killed before buffer.db existed left is
// removed first (it never held a row).
func openNext(dir string, sch *schema.Schema, cfg logstore.Config, o Options) (*logstore.Log, error) {
	if _, err := os.Stat(filepath.Join(dir, logstore.BufferFile)); errors.Is(err, fs.ErrNotExist) {
		if err := logstore.RemoveUnborn(dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, err
		}
		return logstore.Create(dir, sch, cfg, o.nextOptions()...)
	}
	lg, err := logstore.Open(dir, logstore.Writer, o.nextOptions()...)
	if err != nil {
		return nil, err
	}
	st, err := lg.Status(context.Background())
	if err != nil {
		_ = lg.Close()
		return nil, err
	}
	if st.Start != cfg.Start || st.End != cfg.Start || !bytes.Equal(lg.Schema().JSON(), sch.JSON()) || lg.Schema().IsAny() != sch.IsAny() {
		_ = lg.Close()
		return nil, fmt.Errorf("%s holds a log [%d,%d) with another schema or start than this migration makes (an empty log from %d); it is no log this migration made: move it away and run migrate again",
			dir, st.Start, st.End, cfg.Start)
	}
	return lg, nil
}

// nextOptions are the options the next log is created or opened with.
func (o Options) nextOptions() []logstore.Option {
	return append([]logstore.Option{logstore.WithClock(o.Clock)}, o.NextOptions...)
}

// declared is a schema as the metadata records it: its JSON, or null.
func declared(sch *schema.Schema) json.RawMessage {
	if sch.IsAny() {
		return json.RawMessage("null")
	}
	return bytes.Clone(sch.JSON())
}

func planSchema(p migratePlan) (*schema.Schema, error) {
	if len(p.Schema) == 0 || string(p.Schema) == "null" {
		return schema.Any(), nil
	}
	return schema.Compile(p.Schema)
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// sameDeclaration reports whether the log already has the schema and
// sort order of the plan.
func sameDeclaration(lg *meta.Log, p migratePlan) bool {
	return sameJSON(lg.Schema, p.Schema) && slices.Equal(orEmpty(lg.SortBy), p.SortBy)
}

func equalPlan(a, b migratePlan) bool {
	return sameJSON(a.Schema, b.Schema) && slices.Equal(a.SortBy, b.SortBy)
}

// sameJSON compares two JSON documents byte for byte once compacted: the
// metadata stores schemas indented, and property order is column order, so
// nothing looser would do. Empty is null.
func sameJSON(a, b json.RawMessage) bool {
	return bytes.Equal(compact(a), compact(b))
}

func compact(doc json.RawMessage) []byte {
	if len(bytes.TrimSpace(doc)) == 0 {
		return []byte("null")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, doc); err != nil {
		return doc
	}
	return buf.Bytes()
}

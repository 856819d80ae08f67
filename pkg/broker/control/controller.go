package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
	"github.com/streamcast/streamcast/pkg/schema"
)

// Options are the controller's knobs that are not configuration.
type Options struct {
	// Logger receives the controller's log; nil discards it.
	Logger *log.Logger
	// Executable, when set, is the streamcast binary the migration worker
	// process runs (migrator.go); ConfigFile is passed to it as --config.
	// Without one, migrations run in the server's process.
	Executable string
	ConfigFile string
}

// The controller's test hooks, set only by export_test.go (net/http keeps
// its own so): a crash test stops the process at one of them. They are
// not in Options, so that no caller of the package can reach them.
var (
	// testHookAfterCommit is called after a mutation's transaction
	// commits and before its answer is written.
	testHookAfterCommit func()
	// testHookBeforeRun is called with an operation's kind once it is
	// marked running and before it does anything.
	testHookBeforeRun func(kind string)
)

// Observed is what this boot of the server last saw of a registered
// stream: an observation, not durable proof of its health.
type Observed struct {
	State         string `json:"state"`
	BootID        string `json:"boot_id"`
	Generation    int64  `json:"generation"` // starts of the stream in this boot
	Revision      int64  `json:"revision"`   // the declaration's revision it serves (or last served)
	At            int64  `json:"at"`         // Unix seconds
	ReadAdmission bool   `json:"read_admission"`
	WriteAdmit    bool   `json:"write_admission"`
	ChildrenReady bool   `json:"children_ready"`
	err           string
}

// Observed states.
const (
	ObservedStopped   = "stopped"
	ObservedStarting  = "starting"
	ObservedServing   = "serving"
	ObservedStopping  = "stopping"
	ObservedMigrating = "migrating"
	ObservedRetiring  = "retiring"
	ObservedRetired   = "retired" // served for replay, takes no rows
	ObservedFailed    = "failed"
)

// Controller serves the control API and runs its operations, one at a
// time, in the order they were accepted: operations are serialised, so
// two on one stream never interleave. Data traffic never waits on it: the
// streams' connections and commits touch neither the registry nor its
// lock. The worker goroutine is the controller's; Close stops it.
type Controller struct {
	cfg    *config.Config
	reg    *Registry
	rt     Runtime
	opts   Options
	logger *log.Logger
	bootID string

	wake chan struct{}

	runMu  sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	observed map[string]*Observed

	// migrator runs online migrations in a child process; nil without
	// Options.Executable.
	migrator *migrationWorker
}

// New builds a controller over an open registry; nothing runs until Start.
func New(cfg *config.Config, reg *Registry, rt Runtime, o Options) *Controller {
	if o.Logger == nil {
		o.Logger = log.New(io.Discard)
	}
	c := &Controller{cfg: cfg, reg: reg, rt: rt, opts: o, logger: o.Logger, bootID: newID(), wake: make(chan struct{}, 1), observed: map[string]*Observed{}}
	if o.Executable != "" {
		c.migrator = &migrationWorker{exe: o.Executable, configFile: o.ConfigFile, level: cfg.Log.Level, logger: o.Logger}
	}
	return c
}

// BootID identifies this boot of the server.
func (c *Controller) BootID() string { return c.bootID }

// Boot replays what the last run left unfinished before anything serves:
// each pending migration and retirement is finished offline (both resume
// where they stopped, package lifecycle), and declarations and no-ops
// settle. It then returns the registered streams to serve, with their
// desired state serving or retired; the server opens them with its own
// streams. A stream whose identity is bound but whose log is missing is
// not among them and is observed failed (I8: it is never recreated); so
// is one that shares its name with a static stream.
func (c *Controller) Boot(ctx context.Context) ([]Serve, error) {
	ops, err := c.reg.pendingOps(ctx)
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		if op.Kind == KindDesired {
			// Starting and stopping wait for the server: the worker
			// runs them once it serves.
			continue
		}
		c.execute(ctx, op, true)
	}
	recs, err := c.reg.Streams(ctx)
	if err != nil {
		return nil, err
	}
	var out []Serve
	for _, rec := range recs {
		c.observe(rec.Name, func(o *Observed) { o.State, o.Revision = ObservedStopped, rec.Revision })
		if rec.Desired == Stopped {
			continue
		}
		if static, ok := c.rt.Static(rec.Name); ok {
			c.fail(rec.Name, staticClash(rec.Name, static))
			continue
		}
		sv, err := c.serveOf(ctx, &rec)
		if err != nil {
			c.fail(rec.Name, err)
			continue
		}
		if sv != nil {
			c.observe(rec.Name, func(o *Observed) { o.State = ObservedStarting })
			out = append(out, *sv)
		}
	}
	return out, nil
}

// Started records that the server serves a stream Boot returned (err
// nil, with its id) or could not open it.
func (c *Controller) Started(ctx context.Context, name, streamID string, err error) {
	if err != nil {
		c.fail(name, err)
		return
	}
	rec, rerr := c.record(ctx, name)
	if rerr != nil || rec == nil {
		return
	}
	c.served(ctx, rec, streamID)
}

// Start runs the worker: the operations pending since Boot, then each
// one accepted, until Close.
func (c *Controller) Start() {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	if c.done != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	go func() {
		defer close(c.done)
		c.work(ctx)
	}()
}

// Close stops the worker and waits for it. An operation it was running
// is cancelled where it can be and stays pending: the next Boot replays
// it. Close does not close the registry.
func (c *Controller) Close() {
	c.runMu.Lock()
	cancel, done := c.cancel, c.done
	c.runMu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	if c.migrator != nil {
		c.migrator.close()
	}
}

func (c *Controller) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Controller) work(ctx context.Context) {
	var pruned time.Time
	for {
		// Between operations, never during one: the worker is the only
		// goroutine here, so pruning needs no lock of its own.
		if time.Since(pruned) >= pruneEvery {
			pruned = time.Now()
			c.prune(ctx, pruned)
		}
		op, err := c.reg.nextPending(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.logger.Error("control: read the pending operations", "err", err)
			op = nil
		}
		if op == nil {
			select {
			case <-ctx.Done():
				return
			case <-c.wake:
			case <-time.After(time.Second): // the registry is the queue; a lost wake costs a second
			}
			continue
		}
		c.execute(ctx, op, false)
	}
}

// pruneEvery is how often the worker drops the receipts and finished
// operations past their retention (ReceiptRetention, OperationRetention).
const pruneEvery = 10 * time.Minute

// prune drops what is past its retention and logs how much; a failure is
// logged and retried at the next round, as nothing waits on it.
func (c *Controller) prune(ctx context.Context, at time.Time) {
	receipts, ops, err := c.reg.prune(ctx, at)
	switch {
	case err != nil && ctx.Err() == nil:
		c.logger.Error("control: prune the registry's old receipts and operations; it is tried again in 10 minutes", "err", err)
	case receipts+ops > 0:
		c.logger.Info("control: pruned the registry", "receipts", receipts, "operations", ops)
	}
}

// execute runs one operation to its end, recording running, then
// succeeded or failed. At boot (offline) nothing serves yet, so starting
// is left to the server and stopping has nothing to stop.
func (c *Controller) execute(ctx context.Context, op *Operation, offline bool) {
	if err := c.reg.update(ctx, func(t tx) error { return t.setStatus(op.ID, StatusRunning, "") }); err != nil {
		c.logger.Error("control: mark an operation running", "operation", op.ID, "err", err)
		return
	}
	if testHookBeforeRun != nil {
		testHookBeforeRun(op.Kind)
	}
	err := c.run(ctx, op, offline)
	if ctx.Err() != nil {
		return // stopping: the operation stays running, and the next boot replays it
	}
	status, msg := StatusSucceeded, ""
	if err != nil {
		status, msg = StatusFailed, publicMessage(err)
		c.logger.Error("control: operation failed", "operation", op.ID, "kind", op.Kind, "stream", op.Stream, "err", err)
	} else {
		c.logger.Info("control: operation succeeded", "operation", op.ID, "kind", op.Kind, "stream", op.Stream)
	}
	if uerr := c.reg.update(context.WithoutCancel(ctx), func(t tx) error { return t.setStatus(op.ID, status, msg) }); uerr != nil {
		c.logger.Error("control: record an operation's end", "operation", op.ID, "err", uerr)
	}
}

func (c *Controller) run(ctx context.Context, op *Operation, offline bool) error {
	rec, err := c.record(ctx, op.Stream)
	if err != nil {
		return err
	}
	if rec == nil {
		return fmt.Errorf("stream %q is no longer registered", op.Stream)
	}
	switch op.Kind {
	case KindCreate, KindReplace:
		return nil // a declaration takes effect at the stream's next start
	case KindDesired:
		return c.converge(ctx, rec)
	case KindMigrate:
		var m Migration
		if err := json.Unmarshal(op.Target, &m); err != nil {
			return fmt.Errorf("the migration's target does not decode: %w", err)
		}
		return c.migrate(ctx, rec, m, offline)
	}
	return fmt.Errorf("unknown operation kind %q", op.Kind)
}

// converge moves the stream to its desired state.
func (c *Controller) converge(ctx context.Context, rec *Record) error {
	name := rec.Name
	switch rec.Desired {
	case Stopped:
		c.observe(name, func(o *Observed) { o.State = ObservedStopping })
		if err := c.rt.StopStream(ctx, name); err != nil {
			c.fail(name, err)
			return err
		}
		c.observe(name, func(o *Observed) { o.State, o.err = ObservedStopped, "" })
		return nil
	case Serving:
		if c.rt.Serves(name).Served {
			return nil
		}
		return c.start(ctx, rec)
	case Retired:
		if rec.StreamID == "" {
			// Never served, so no log: nothing to end.
			c.observe(name, func(o *Observed) { o.State = ObservedRetired })
			return nil
		}
		c.observe(name, func(o *Observed) { o.State = ObservedRetiring })
		// Between the stop and the start, arrivals are told to retry,
		// not that the stream does not exist.
		release := c.rt.Hold(name)
		defer release()
		if err := c.rt.StopStream(ctx, name); err != nil {
			c.fail(name, err)
			return err
		}
		ls, err := c.lifecycleStream(rec)
		if err != nil {
			c.fail(name, err)
			return err
		}
		if _, err := lifecycle.Retire(ctx, ls, lifecycle.Options{}); err != nil {
			c.fail(name, err)
			return err
		}
		// Retired streams are still served for replay (writers get 4410).
		return c.start(ctx, rec)
	}
	return fmt.Errorf("unknown desired state %q", rec.Desired)
}

// migrate moves a bound stream to m's schema and sort_by. A served stream
// migrates online (Runtime.MigrateStream): its writes are fenced and its
// publishers get 1001 once their rows are acknowledged, its subscribers
// stay, the migration runs over its log, the declaration takes the new
// schema in the same transaction that ends the operation, and the new log
// serves from the seam on. A stream not served (or at boot, offline)
// migrates offline and serves again when its desired state says so.
func (c *Controller) migrate(ctx context.Context, rec *Record, m Migration, offline bool) error {
	name := rec.Name
	pc, err := c.cfg.ProfileConfig(rec.Declaration.StorageProfile)
	if err != nil {
		return err
	}
	sch, err := schema.Compile(m.Schema)
	if err != nil {
		return fmt.Errorf("the migration's schema: %w", err)
	}
	st := rec.Declaration.Stream(name, c.cfg)
	st.SortBy = m.SortBy
	lc, err := pc.LogSettings(st, "")
	if err != nil {
		return err
	}
	ls, err := c.lifecycleStream(rec)
	if err != nil {
		return err
	}
	c.observe(name, func(o *Observed) { o.State = ObservedMigrating })
	// While other streams serve, the migration's file work runs in the
	// worker process at the lowest CPU priority (migrator.go), started
	// now, when none runs, so that its start-up overlaps the checks, the
	// fence and the drain. At boot nothing serves yet, and it runs here.
	var worker *migrationWorker
	if c.migrator != nil && !offline {
		if err := c.migrator.start(); err != nil {
			c.logger.Warn("control: the migration runs in the server's process", "stream", name, "err", err)
		} else {
			worker = c.migrator
		}
	}
	// run migrates, and returns the new log open when keep asked for it
	// (Runtime.MigrateStream serves it); on an error it holds no log open.
	// With the worker it closes current first (the worker takes the log's
	// writer lock) and returns no log: the runtime opens the new one.
	run := func(ctx context.Context, current *logstore.Log, keep bool, next []logstore.Option) (*logstore.Log, error) {
		if err := c.checkMigration(ctx, ls, sch); err != nil {
			return nil, err
		}
		d := lifecycle.Declaration{Schema: sch, Log: lc}
		var res *lifecycle.Migration
		if worker != nil {
			if current != nil {
				if err := current.Close(); err != nil {
					return nil, err
				}
			}
			job := lifecycle.MigrateJob{Stream: name, Root: pc.Root, Published: pc.Published, S3: ls.S3, Schema: m.Schema, Log: lc}
			res, err = worker.run(ctx, job)
			if errors.Is(err, errWorkerStarved) {
				// A server whose CPUs never idle: the worker was ended,
				// and the migration resumes here from its intent, as a
				// rerun after a crash would, rather than keep the
				// stream's writes fenced until a CPU is free. The
				// runtime opens the new log, as after the worker.
				// Not a warning: the designed way through on a busy
				// server, and the migration goes on.
				c.logger.Info("control: the migration finishes in the server's process", "stream", name, "why", err)
				res, err = lifecycle.MigrateTo(ctx, ls, d, lifecycle.Options{})
			}
		} else {
			res, err = lifecycle.MigrateTo(ctx, ls, d, lifecycle.Options{Current: current, KeepNext: keep, NextOptions: next})
		}
		if err != nil {
			return nil, err
		}
		err = c.reg.update(context.WithoutCancel(ctx), func(t tx) error {
			cur, err := t.stream(name)
			if err != nil || cur == nil {
				return cmpErr(err, fmt.Errorf("stream %q is no longer registered", name))
			}
			cur.Declaration.Schema, cur.Declaration.SortBy = compactJSON(m.Schema), slices.Clone(m.SortBy)
			cur.Revision++
			*rec = *cur
			if err := t.putStream(cur); err != nil {
				return err
			}
			return t.bumpCollection()
		})
		if err != nil {
			if res.Log != nil {
				_ = res.Log.Close()
			}
			return nil, err
		}
		return res.Log, nil
	}
	if !offline && c.rt.Serves(name).Served {
		next := *rec
		next.Declaration.Schema, next.Declaration.SortBy = compactJSON(m.Schema), slices.Clone(m.SortBy)
		sv, err := c.serveOf(ctx, &next)
		if err == nil && sv == nil {
			err = fmt.Errorf("stream %q has nothing to serve after its migration", name)
		}
		if err != nil {
			c.fail(name, err)
			return err
		}
		id, err := c.rt.MigrateStream(ctx, *sv, func(ctx context.Context, current *logstore.Log, next []logstore.Option) (*logstore.Log, error) {
			return run(ctx, current, true, next)
		})
		var mf *MigrationFailed
		if errors.As(err, &mf) && mf.Serving {
			// Nothing moved: the stream serves the declaration it served.
			c.logger.Error("control: migration failed; the stream serves on its old log", "stream", name, "err", err)
			// Its declaration is the one it served (the migration's
			// revision changed none of it): observe that revision.
			rev := rec.Revision
			if cur, rerr := c.record(ctx, name); rerr == nil && cur != nil {
				rev = cur.Revision
			}
			c.observe(name, func(o *Observed) { o.State, o.Revision, o.err = ObservedServing, rev, publicMessage(err) })
			return err
		}
		if err != nil {
			c.fail(name, err)
			return err
		}
		c.served(ctx, rec, id)
		return nil
	}
	if _, err := run(ctx, nil, false, nil); err != nil {
		c.fail(name, err)
		return err
	}
	c.observe(name, func(o *Observed) { o.State = ObservedStopped })
	if offline || rec.Desired == Stopped {
		return nil
	}
	return c.start(ctx, rec)
}

// checkMigration refuses, before the migration records its intent (so
// before anything is written or fenced), what would make it fail half
// way: a column whose type differs from the one the stream ever declared
// for that name, and a place for the next log that something else holds.
// Its refusals name the column or log, never a path (the server's log
// has the path). An interrupted migration (its intent recorded) is left
// to lifecycle.Migrate, which resumes it.
func (c *Controller) checkMigration(ctx context.Context, ls lifecycle.Stream, sch *schema.Schema) error {
	store, err := meta.NewStore(ctx, ls.Layout, ls.Name, ls.S3)
	if err != nil {
		return err
	}
	res, err := meta.Resolve(ctx, store)
	if err != nil || res.Metadata == nil || res.Metadata.Intent != nil || res.Metadata.Current() == nil {
		return err // lifecycle.Migrate words these
	}
	md := res.Metadata
	if err := md.Clone().DeclareColumns(sch); err != nil {
		return invalidf("the migration's schema is refused: %v; POST the migration again with that fixed", err)
	}
	next := md.NextLogName()
	dir := ls.Layout.LogDir(ls.Name, next)
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
	case !fi.IsDir():
		err = errors.New("a file is in its place")
	default:
		var entries []os.DirEntry
		if entries, err = os.ReadDir(dir); err == nil && len(entries) > 0 {
			err = fmt.Errorf("a directory holding %d entries is in its place", len(entries))
		}
	}
	if err == nil {
		return nil
	}
	c.logger.Error("control: the migration's new log cannot be created", "stream", ls.Name, "log", next, "dir", dir, "err", err)
	return invalidf("the migration's new log %s cannot be created: %v in the storage profile's root, and it is no log this migration made; "+
		"the server's log names the path: move it away, then POST the migration again", next, err)
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// start serves a registered stream and binds its identity.
func (c *Controller) start(ctx context.Context, rec *Record) error {
	name := rec.Name
	if static, ok := c.rt.Static(name); ok {
		err := staticClash(name, static)
		c.fail(name, err)
		return err
	}
	sv, err := c.serveOf(ctx, rec)
	if err != nil {
		c.fail(name, err)
		return err
	}
	if sv == nil {
		return nil
	}
	c.observe(name, func(o *Observed) { o.State = ObservedStarting })
	id, err := c.rt.StartStream(ctx, *sv)
	if err != nil {
		c.fail(name, err)
		return err
	}
	c.served(ctx, rec, id)
	return nil
}

// staticClash is why a registered stream named name does not serve beside
// the config's stream static.
func staticClash(name, static string) error {
	if name == static {
		return fmt.Errorf("stream %q is both in the config's streams: list and in the control registry; a name can be only one: remove it from one of them", name)
	}
	return fmt.Errorf("stream %q differs only in case from the config's stream %q; on a case-insensitive file system they would share a directory, so it does not serve: "+
		"remove one of them (or retire the registered one and register it under a name that differs in more than case)", name, static)
}

// served records a stream the server now serves, binding its id on its
// first start.
func (c *Controller) served(ctx context.Context, rec *Record, id string) {
	if rec.StreamID == "" && id != "" {
		err := c.reg.update(context.WithoutCancel(ctx), func(t tx) error {
			cur, err := t.stream(rec.Name)
			if err != nil || cur == nil {
				return err
			}
			cur.StreamID = id
			rec.StreamID = id
			return t.putStream(cur)
		})
		if err != nil {
			c.logger.Error("control: bind the stream's identity", "stream", rec.Name, "err", err)
		}
	}
	state := ObservedServing
	if rec.Desired == Retired {
		state = ObservedRetired
	}
	c.observe(rec.Name, func(o *Observed) {
		o.State, o.Revision, o.err = state, rec.Revision, ""
		o.Generation++
	})
}

// serveOf builds what the runtime serves for rec, after the identity
// checks: a bound stream's metadata must exist and carry its id (I8: a
// bound log that is missing is never recreated), and an unbound one may
// be created only when its declaration says create_if_absent. nil, nil
// means there is nothing to serve (retired and never bound).
func (c *Controller) serveOf(ctx context.Context, rec *Record) (*Serve, error) {
	d := rec.Declaration
	if rec.Desired == Retired && rec.StreamID == "" {
		return nil, nil
	}
	sch, err := d.Check(c.cfg)
	if err != nil {
		return nil, err
	}
	pc, err := c.cfg.ProfileConfig(d.StorageProfile)
	if err != nil {
		return nil, err
	}
	lay, err := meta.NewLayout(pc.Root, pc.Published)
	if err != nil {
		return nil, config.PublishedError(err)
	}
	store, err := meta.NewStore(ctx, lay, rec.Name, pc.S3)
	if err != nil {
		return nil, err
	}
	res, err := meta.Resolve(ctx, store)
	if err != nil {
		return nil, err
	}
	switch {
	case rec.StreamID != "" && res.Metadata == nil:
		return nil, &bindError{fmt.Sprintf("stream %q is bound to stream id %s, but neither its home nor its published copy holds it; "+
			"a bound stream is never created afresh (docs/design.md I8): restore it (streamcast restore) and start it again", rec.Name, rec.StreamID)}
	case rec.StreamID != "" && res.Metadata.StreamID != rec.StreamID:
		return nil, &bindError{fmt.Sprintf("stream %q is bound to stream id %s, but its storage holds stream id %s; "+
			"it is refused rather than served as another stream's history (docs/design.md I8)", rec.Name, rec.StreamID, res.Metadata.StreamID)}
	case rec.StreamID == "" && res.Metadata == nil && d.Initialization != CreateIfAbsent:
		return nil, &bindError{fmt.Sprintf("stream %q has no log yet and its initialization is %s; declare initialization: %s to let its first start create it",
			rec.Name, OpenExisting, CreateIfAbsent)}
	}
	return &Serve{Stream: d.Stream(rec.Name, c.cfg), Schema: sch, Limits: d.StreamLimits(c.cfg.Limits), Storage: pc}, nil
}

// bindError is a refusal to serve that names no path: its message is
// shown to the API's clients as it is.
type bindError struct{ msg string }

func (e *bindError) Error() string { return e.msg }

func (c *Controller) lifecycleStream(rec *Record) (lifecycle.Stream, error) {
	pc, err := c.cfg.ProfileConfig(rec.Declaration.StorageProfile)
	if err != nil {
		return lifecycle.Stream{}, err
	}
	lay, err := meta.NewLayout(pc.Root, pc.Published)
	if err != nil {
		return lifecycle.Stream{}, config.PublishedError(err)
	}
	return lifecycle.Stream{Layout: lay, S3: pc.S3, Name: rec.Name}, nil
}

func (c *Controller) record(ctx context.Context, name string) (rec *Record, err error) {
	err = c.reg.read(ctx, func(t tx) error {
		rec, err = t.stream(name)
		return err
	})
	return rec, err
}

func (c *Controller) observe(name string, f func(o *Observed)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.observed[name]
	if o == nil {
		o = &Observed{State: ObservedStopped}
		c.observed[name] = o
	}
	f(o)
	o.At = time.Now().Unix()
}

func (c *Controller) fail(name string, err error) {
	c.logger.Error("control: stream not served", "stream", name, "err", err)
	c.observe(name, func(o *Observed) { o.State, o.err = ObservedFailed, publicMessage(err) })
}

// observation returns what this boot saw of name, with the runtime's
// admission now.
func (c *Controller) observation(name string) Observed {
	c.mu.Lock()
	o := Observed{State: ObservedStopped}
	if p := c.observed[name]; p != nil {
		o = *p
	}
	c.mu.Unlock()
	o.BootID = c.bootID
	if o.At == 0 {
		o.At = time.Now().Unix()
	}
	a := c.rt.Serves(name)
	o.ReadAdmission, o.WriteAdmit, o.ChildrenReady = a.Served && a.Read, a.Served && a.Write, a.ChildrenReady
	return o
}

// publicMessage is what an operation's error says to the API's clients:
// the refusals this package words itself, else a generic line (the
// server's log has the rest): an error from below may name a path.
func publicMessage(err error) string {
	var be *bindError
	var inv *invalid
	var mf *MigrationFailed
	switch {
	case errors.As(err, &be):
		return be.msg
	case errors.As(err, &mf) && mf.Serving && errors.As(err, &inv):
		return inv.msg + " The stream serves on its old log, from the same offsets."
	case errors.As(err, &mf) && mf.Serving:
		return "the migration failed before it changed the stream's log, and the stream serves on its old log from the same offsets; " +
			"the server's log says why (look for the operation's id): fix that, then POST the migration again"
	case errors.As(err, &inv):
		return inv.msg
	case errors.Is(err, lifecycle.ErrRetired):
		return "the stream is retired; a retired stream is never migrated"
	case errors.Is(err, lifecycle.ErrPending):
		return "another operation on the stream's log is under way (an offline command?); let it finish, then retry with a new idempotency key"
	}
	return "the transition failed; the server's log says why (look for the operation's id), and the operation may have had part of its effect: inspect before retrying"
}

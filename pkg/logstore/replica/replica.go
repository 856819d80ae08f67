package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/file"
	"github.com/benbjohnson/litestream/s3"
	"github.com/superfly/ltx"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// File names inside a log's directory.
const (
	ProgressFile = logstore.ReplicaProgressFile // the replicator's last shipped position, for /stats (and clean)
	lockRole     = "replicate"                  // <log>/replicate.lock: one replicator per database
)

// WALDir is the directory under a stream's published directory,
// <prefix>/<stream>/, that holds the WAL replicas of the stream's logs
// when no destination is named (Destination), one directory per log:
// beside the stream's tables, never inside one.
const WALDir = "_wal"

// Options tune a replicator.
type Options struct {
	SyncInterval      time.Duration // how often the WAL is shipped; 0 means DefaultSyncInterval
	SnapshotInterval  time.Duration // how often a full snapshot is written; 0 means DefaultSnapshotInterval
	SnapshotRetention time.Duration // how long snapshots are kept; 0 means DefaultSnapshotRetention
	Logger            *slog.Logger  // where litestream and the replicator log; nil discards
	Now               func() time.Time
}

func (o Options) withDefaults() Options {
	if o.SyncInterval <= 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.SnapshotInterval <= 0 {
		o.SnapshotInterval = DefaultSnapshotInterval
	}
	if o.SnapshotRetention <= 0 {
		o.SnapshotRetention = DefaultSnapshotRetention
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Target is one log to replicate: its directory and its replica (see
// Destination for where that lives).
type Target struct {
	LogDir string
	At     warehouse.Location // where the replica lives, for messages
	Client litestream.ReplicaClient
}

// FileClient is the replica client for a directory.
func FileClient(dir string) litestream.ReplicaClient {
	return file.NewReplicaClient(dir)
}

// Progress is what a replicator has shipped of one log: every offset below
// ShippedEnd is in the replica. It is written to <log>/replicate.json after
// each round.
type Progress struct {
	LogID      string    `json:"log_id"`
	ShippedEnd int64     `json:"shipped_end"` // the log's End as of the last round that shipped
	TXID       uint64    `json:"txid"`        // the replica's transaction id after that round
	Started    time.Time `json:"started"`     // when that round began (and noted the log's end)
	At         time.Time `json:"at"`          // when that round finished
}

// ReadProgress reads the progress the replicator of the log in dir last
// recorded. ok is false when it has recorded none.
func ReadProgress(dir string) (p Progress, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, ProgressFile))
	if errors.Is(err, os.ErrNotExist) {
		return Progress{}, false, nil
	}
	if err != nil {
		return Progress{}, false, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return Progress{}, false, fmt.Errorf("read %s: %w", filepath.Join(dir, ProgressFile), err)
	}
	return p, true, nil
}

// Run replicates every target until ctx ends, then ships what is left and
// returns. A target whose lock another replicator holds stands by and takes
// over when that lock frees. ready is called once every target either
// replicates or stands by. Run returns the first error that stops a target
// for good (a replica that holds another history); errors of a round are
// logged and retried.
func Run(ctx context.Context, targets []Target, opts Options, ready func()) error {
	opts = opts.withDefaults()
	var (
		wg      sync.WaitGroup
		started sync.WaitGroup
		mu      sync.Mutex
		errs    []error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, t := range targets {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			if err := runOne(ctx, t, opts, started.Done); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel()
			}
		}()
	}
	started.Wait()
	if ready != nil && ctx.Err() == nil {
		ready()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runOne replicates one log. started is called once it replicates or
// stands by (or has failed).
func runOne(ctx context.Context, t Target, opts Options, started func()) (err error) {
	once := sync.OnceFunc(started)
	defer once()
	release, err := standBy(ctx, t.LogDir, opts, once)
	if err != nil || release == nil {
		return err
	}
	defer release()

	lg, err := logstore.Open(t.LogDir, logstore.ReadOnly)
	if err != nil {
		return fmt.Errorf("replicate %s: %w", t.LogDir, err)
	}
	defer lg.Close()
	db, store := newStore(t, opts)
	remote, err := checkHistory(ctx, lg, db, t.Client)
	if err != nil {
		return err
	}
	if remote == 0 {
		// An empty replica (a destination new to this log, or one emptied)
		// must receive the whole database. litestream would ship every
		// transaction since the first, from local files its L0 retention
		// deletes minutes after an earlier replica compacted them, and
		// then fail every round; without them it starts with a snapshot.
		if err := db.ResetLocalState(ctx); err != nil {
			return fmt.Errorf("replicate %s: %w", t.LogDir, err)
		}
	}
	if err := store.Open(ctx); err != nil {
		return fmt.Errorf("replicate %s: %w", t.LogDir, err)
	}
	once()
	defer func() {
		// Ship what is left even though ctx has ended: a planned stop
		// must leave the replica complete.
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, cerr := ship(closeCtx, lg, db, opts); cerr != nil {
			opts.Logger.Warn("final replication round failed", "log", t.LogDir, "err", cerr)
		}
		if cerr := store.Close(closeCtx); cerr != nil {
			opts.Logger.Warn("closing the replica failed", "log", t.LogDir, "err", cerr)
		}
	}()

	tick := time.NewTicker(opts.SyncInterval)
	defer tick.Stop()
	failing := false
	for {
		if _, err := ship(ctx, lg, db, opts); err != nil && ctx.Err() == nil {
			// An outage is logged once, and its end once, not every round.
			if !failing {
				opts.Logger.Error("cannot ship the WAL; retrying every round", "log", t.LogDir, "err", err)
			}
			failing = true
		} else if failing && err == nil {
			opts.Logger.Info("shipping the WAL again", "log", t.LogDir)
			failing = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// standBy takes the log's replicate lock, waiting while another
// replicator holds it. A nil release with a nil error means ctx ended
// first.
func standBy(ctx context.Context, dir string, opts Options, waiting func()) (release func(), err error) {
	said := false
	for {
		release, err := logstore.LockRole(dir, lockRole)
		if err == nil {
			if said {
				opts.Logger.Info("took over replication", "log", dir)
			}
			return release, nil
		}
		if !errors.Is(err, logstore.ErrBusy) {
			return nil, fmt.Errorf("replicate %s: %w", dir, err)
		}
		if !said {
			opts.Logger.Info("another replicator ships this log; standing by", "log", dir, "reason", err)
			said = true
			waiting()
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(opts.SyncInterval):
		}
	}
}

// checkpointBusyTimeout is how long a round waits for the database's write
// lock. litestream checkpoints inside a round, once the WAL passes a
// thousand pages, behind a barrier write that needs that lock; the serving
// process commits nearly back to back under load, so with litestream's
// default (1 s) a round that checkpoints waited the whole second and then
// gave up, and every row acknowledged meanwhile waited with it: that set
// the replication lag's p99 at 1.5-2 s. A short wait either finds a gap
// between commits or skips the checkpoint until a later round (the WAL
// grows meanwhile, and the serving process checkpoints it past
// logstore.ReplicatedCheckpointPages). Nothing else in a round takes the
// write lock.
const checkpointBusyTimeout = 50 * time.Millisecond

// newStore sets up litestream for one log. Its own monitors are off: the
// replicator drives every round, so it knows which offsets a round shipped.
func newStore(t Target, opts Options) (*litestream.DB, *litestream.Store) {
	db := litestream.NewDB(filepath.Join(t.LogDir, logstore.BufferFile))
	db.MonitorInterval = 0
	db.BusyTimeout = checkpointBusyTimeout
	r := litestream.NewReplicaWithClient(db, t.Client)
	r.MonitorEnabled = false
	db.Replica = r
	store := litestream.NewStore([]*litestream.DB{db}, litestream.DefaultCompactionLevels)
	// litestream narrates every monitor it starts and every snapshot at
	// info; only its warnings and errors are worth an operator's log.
	quiet := slog.New(warnings{opts.Logger.Handler()})
	store.Logger = quiet
	store.SnapshotInterval = opts.SnapshotInterval
	store.SnapshotRetention = opts.SnapshotRetention
	db.Logger = quiet
	return db, store
}

// ship runs one round: it notes the log's end, then ships everything
// committed, so every offset below that end is in the replica when it
// returns.
func ship(ctx context.Context, lg *logstore.Log, db *litestream.DB, opts Options) (Progress, error) {
	started := opts.Now().UTC()
	_, end, err := lg.Extent(ctx)
	if err != nil {
		return Progress{}, err
	}
	if err := db.Sync(ctx); err != nil {
		return Progress{}, fmt.Errorf("read the WAL of %s: %w", db.Path(), err)
	}
	if err := db.Replica.Sync(ctx); err != nil {
		return Progress{}, fmt.Errorf("ship the WAL of %s: %w", db.Path(), err)
	}
	p := Progress{LogID: lg.ID(), ShippedEnd: end, TXID: uint64(db.Replica.Pos().TXID), Started: started, At: opts.Now().UTC()}
	return p, writeProgress(lg.Dir(), p)
}

// writeProgress replaces <log>/replicate.json. It is a report, not a
// record: a crash that loses it loses only a /stats figure until the next
// round.
func writeProgress(dir string, p Progress) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ProgressFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, ProgressFile))
}

// replicaLevels are the levels a replica may hold transactions in.
var replicaLevels = []int{0, 1, 2, 3, litestream.SnapshotLevel}

// replicaTXID is the highest transaction id the replica holds; 0 when it
// is empty.
func replicaTXID(ctx context.Context, client litestream.ReplicaClient) (ltx.TXID, error) {
	var top ltx.TXID
	for _, level := range replicaLevels {
		itr, err := client.LTXFiles(ctx, level, 0, false)
		if err != nil {
			return 0, fmt.Errorf("list the replica: %w", err)
		}
		for itr.Next() {
			top = max(top, itr.Item().MaxTXID)
		}
		if err := itr.Close(); err != nil {
			return 0, fmt.Errorf("list the replica: %w", err)
		}
	}
	return top, nil
}

// checkHistory refuses to replicate a database over a replica that holds
// another history. litestream, finding a database behind its replica,
// ships a snapshot of the database as the replica's next transaction: for
// a fresh, empty buffer.db that would make every later restore come back
// empty. So when the replica is ahead of what this database has shipped,
// the replica is restored aside and compared: it must be this log (same
// log id) and no further along than this database. It returns the
// replica's highest transaction id, 0 for an empty replica.
func checkHistory(ctx context.Context, lg *logstore.Log, db *litestream.DB, client litestream.ReplicaClient) (remote ltx.TXID, err error) {
	remote, err = replicaTXID(ctx, client)
	if err != nil || remote == 0 {
		return remote, err
	}
	local, err := db.Pos()
	if err != nil {
		return remote, fmt.Errorf("read what %s has shipped: %w", db.Path(), err)
	}
	if local.TXID >= remote {
		return remote, nil
	}
	aside, err := os.MkdirTemp(lg.Dir(), ".replica-check-")
	if err != nil {
		return remote, err
	}
	defer os.RemoveAll(aside)
	if err := Restore(ctx, client, aside); err != nil {
		return remote, err
	}
	theirs, err := logstore.Open(aside, logstore.ReadOnly)
	if err != nil {
		return remote, fmt.Errorf("read the replica of %s: %w", lg.Dir(), err)
	}
	defer theirs.Close()
	if theirs.ID() != lg.ID() {
		return remote, &HistoryError{Dir: lg.Dir(), LogID: lg.ID(), ReplicaLogID: theirs.ID()}
	}
	ours, err := lg.Status(ctx)
	if err != nil {
		return remote, err
	}
	held, err := theirs.Status(ctx)
	if err != nil {
		return remote, err
	}
	if held.End > ours.End {
		return remote, &HistoryError{Dir: lg.Dir(), LogID: lg.ID(), ReplicaLogID: theirs.ID(), End: ours.End, ReplicaEnd: held.End}
	}
	return remote, nil
}

// HistoryError is the refusal to replicate a log over a replica that holds
// another history: another log's, or more of this log's rows than the
// database has.
type HistoryError struct {
	Dir                 string
	LogID, ReplicaLogID string
	End, ReplicaEnd     int64 // set when the log ids agree
}

func (e *HistoryError) Error() string {
	if e.LogID != e.ReplicaLogID {
		return fmt.Sprintf("will not replicate %s: its replica holds the history of another log (log id %s; this one is %s), and shipping over it would destroy that history. Move the replica away if that log is gone for good, or bring the log back from the replica",
			e.Dir, e.ReplicaLogID, e.LogID)
	}
	return fmt.Sprintf("will not replicate %s: its replica holds offsets up to %d but the database ends at %d, so this copy is behind the one that shipped; bring the log back from the replica instead",
		e.Dir, e.ReplicaEnd-1, e.End-1)
}

// Restore writes the newest state the replica holds to dir/buffer.db.
func Restore(ctx context.Context, client litestream.ReplicaClient, dir string) error {
	r := litestream.NewReplicaWithClient(nil, client)
	if err := r.Restore(ctx, litestream.RestoreOptions{OutputPath: filepath.Join(dir, logstore.BufferFile)}); err != nil {
		return fmt.Errorf("restore %s from its replica: %w", filepath.Join(dir, logstore.BufferFile), err)
	}
	return nil
}

// Destination is where the replicas of logs go. With Location set, the
// replica of log L of stream S lives at <Location>/S/L/; with the zero
// Location, at the place beside the published tables,
// <published prefix>/S/_wal/L/, which is safe only while that prefix lies
// outside the root (an s3:// prefix, or a directory elsewhere).
type Destination struct {
	Location warehouse.Location
	// S3 tells how to reach an s3:// Location; credentials come from the
	// AWS environment only. Unused without a Location: the log's own
	// settings reach its published prefix.
	S3 warehouse.S3
}

// Locate returns where the replica of log of stream lives: under dest when
// it is set, else beside the tables under published.
func Locate(dest, published warehouse.Location, stream, log string) warehouse.Location {
	if !dest.IsZero() {
		return under(dest, stream, log)
	}
	return under(published, stream, WALDir, log)
}

// under returns the location of elem below l.
func under(l warehouse.Location, elem ...string) warehouse.Location {
	if l.S3 != "" {
		return warehouse.Location{S3: l.Join(elem...)}
	}
	return warehouse.Location{Dir: l.Join(elem...)}
}

// TargetFor finds where the replica of the log in dir lives: under dest,
// or without one beside the log's published tables, from the log's own
// configuration. It refuses a place inside the root that holds the log
// (the directory above its stream's home): losing the root would lose the
// replica with it, and a restore would find nothing.
func TargetFor(dir string, dest Destination) (Target, error) {
	lg, err := logstore.Open(dir, logstore.ReadOnly)
	if err != nil {
		return Target{}, err
	}
	defer lg.Close()
	cfg := lg.Config()
	pub, err := cfg.PublishedPrefix(dir)
	if err != nil {
		return Target{}, fmt.Errorf("find the published prefix of %s: %w", dir, err)
	}
	stream, log, err := lg.Names()
	if err != nil {
		return Target{}, fmt.Errorf("find the replica of %s: %w", dir, err)
	}
	at, s3cfg := Locate(dest.Location, pub, stream, log), cfg.S3
	if !dest.Location.IsZero() {
		s3cfg = dest.S3
	}
	if abs, err := filepath.Abs(dir); err == nil && at.Dir != "" {
		if root := filepath.Dir(filepath.Dir(abs)); Inside(root, at.Dir) {
			return Target{}, &InsideRootError{Log: dir, Replica: at.Dir, Root: root}
		}
	}
	return Target{LogDir: dir, At: at, Client: Client(at, s3cfg)}, nil
}

// InsideRootError is the refusal to keep a log's replica inside the root
// it is meant to outlive.
type InsideRootError struct {
	Log, Replica, Root string
}

func (e *InsideRootError) Error() string {
	return fmt.Sprintf("will not replicate %s to %s: that is inside the root %s, so losing the root loses the replica too; "+
		"give a destination outside it with --%s (such as s3://my-bucket/streamcast-replica), or set replicate.destination in the config",
		e.Log, e.Replica, e.Root, FlagDestination)
}

// Inside reports whether dir is root or lies below it, once both are
// absolute and clean and the symlinks of their longest existing ancestors
// are resolved: two spellings of one place compare equal, and a root
// reached through a link is still the root.
func Inside(root, dir string) bool {
	r, d := realPath(root), realPath(dir)
	if r == d {
		return true
	}
	rel, err := filepath.Rel(r, d)
	return err == nil && !filepath.IsAbs(rel) && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// realPath is p made absolute and clean, with its symlinks resolved as
// far as it exists; a link that points where nothing is yet (a root not
// created yet) is followed too.
func realPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	return resolveLinks(abs, 0)
}

// resolveLinks resolves the symlinks of the absolute path p: those of its
// longest existing ancestor, and a dangling link found on the way.
func resolveLinks(p string, depth int) string {
	const maxLinks = 40 // as the kernel's ELOOP limit
	rest := ""
	for dir := p; ; {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest)
		}
		if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 && depth < maxLinks {
			if to, err := os.Readlink(dir); err == nil {
				if !filepath.IsAbs(to) {
					to = filepath.Join(filepath.Dir(dir), to)
				}
				return resolveLinks(filepath.Join(to, rest), depth+1)
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return p
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// Client returns the client of the replica at loc: a directory, or objects
// under an s3:// URL reached with s3cfg. Credentials come from the AWS
// environment only.
func Client(loc warehouse.Location, s3cfg warehouse.S3) litestream.ReplicaClient {
	if loc.Dir != "" {
		return FileClient(loc.Dir)
	}
	bucket, prefix := loc.SplitS3()
	c := s3.NewReplicaClient()
	c.Bucket = bucket
	c.Path = prefix
	c.Endpoint = s3cfg.Endpoint
	c.Region = s3cfg.Region
	c.ForcePathStyle = s3cfg.PathStyle || s3cfg.Endpoint != ""
	if c.Region == "" {
		c.Region = os.Getenv("AWS_REGION")
	}
	return c
}

// Exists reports whether the replica behind client holds anything.
func Exists(ctx context.Context, client litestream.ReplicaClient) (bool, error) {
	top, err := replicaTXID(ctx, client)
	return top > 0, err
}

// warnings passes on only the records at warning level and above.
type warnings struct{ slog.Handler }

func (w warnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnings) WithAttrs(as []slog.Attr) slog.Handler { return warnings{w.Handler.WithAttrs(as)} }
func (w warnings) WithGroup(name string) slog.Handler    { return warnings{w.Handler.WithGroup(name)} }

package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/file"
)

// BufferFile is the name of the SQLite file a log keeps its recent rows in.
const BufferFile = "buffer.db"

// Options tune a Replicator. The zero value takes litestream's defaults.
type Options struct {
	// SyncInterval is how often the WAL is read and shipped: the bound on
	// the replication lag of an idle-then-busy log, and so the RPO.
	SyncInterval time.Duration
	// SnapshotInterval is how often a full snapshot is written, bounding
	// how many WAL segments a restore replays.
	SnapshotInterval time.Duration
	// SnapshotRetention is how long snapshots (and the WAL after them) are
	// kept in the replica.
	SnapshotRetention time.Duration
	// Logger receives litestream's log lines; nil discards them.
	Logger *slog.Logger
}

// A Replicator ships the WAL of one or more logs' buffer.db files until
// Close.
type Replicator struct {
	store *litestream.Store
	dbs   []*litestream.DB
}

// Target names where one log's replica lives.
type Target struct {
	LogDir string                   // the log's directory, holding buffer.db
	Client litestream.ReplicaClient // the replica at <prefix>/<stream>/_wal/<log>/
}

// FileClient is a replica client for a directory: the replica of a log
// whose stream publishes to a local prefix.
func FileClient(dir string) litestream.ReplicaClient {
	return file.NewReplicaClient(dir)
}

// Start begins shipping every target's WAL. It returns once each database
// is open for replication; shipping goes on in the background until Close.
func Start(ctx context.Context, targets []Target, opts Options) (*Replicator, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var dbs []*litestream.DB
	for _, t := range targets {
		db := litestream.NewDB(filepath.Join(t.LogDir, BufferFile))
		db.Logger = logger
		if opts.SyncInterval > 0 {
			db.MonitorInterval = opts.SyncInterval
		}
		r := litestream.NewReplicaWithClient(db, t.Client)
		if opts.SyncInterval > 0 {
			r.SyncInterval = opts.SyncInterval
		}
		db.Replica = r
		dbs = append(dbs, db)
	}
	store := litestream.NewStore(dbs, litestream.DefaultCompactionLevels)
	store.Logger = logger
	if opts.SnapshotInterval > 0 {
		store.SnapshotInterval = opts.SnapshotInterval
	}
	if opts.SnapshotRetention > 0 {
		store.SnapshotRetention = opts.SnapshotRetention
	}
	if err := store.Open(ctx); err != nil {
		return nil, fmt.Errorf("start replicating: %w", err)
	}
	return &Replicator{store: store, dbs: dbs}, nil
}

// Sync ships everything committed to every database before the call, and
// returns once the replicas hold it.
func (r *Replicator) Sync(ctx context.Context) error {
	var errs []error
	for _, db := range r.dbs {
		if err := db.Sync(ctx); err != nil {
			errs = append(errs, fmt.Errorf("read the WAL of %s: %w", db.Path(), err))
			continue
		}
		if err := db.Replica.Sync(ctx); err != nil {
			errs = append(errs, fmt.Errorf("ship the WAL of %s: %w", db.Path(), err))
		}
	}
	return errors.Join(errs...)
}

// Close ships what is left and stops.
func (r *Replicator) Close(ctx context.Context) error {
	return r.store.Close(ctx)
}

// Restore writes the newest state the replica holds to dir/buffer.db.
func Restore(ctx context.Context, client litestream.ReplicaClient, dir string) error {
	r := litestream.NewReplicaWithClient(nil, client)
	if err := r.Restore(ctx, litestream.RestoreOptions{OutputPath: filepath.Join(dir, BufferFile)}); err != nil {
		return fmt.Errorf("restore %s from its replica: %w", filepath.Join(dir, BufferFile), err)
	}
	return nil
}

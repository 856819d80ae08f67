package control

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"modernc.org/sqlite" // also the "sqlite" database/sql driver

	"github.com/streamcast/streamcast/pkg/logstore"
)

// registryFormat is the registry's schema version; Open refuses another.
const registryFormat = 1

// ErrNoRegistry is wrapped by Open's refusal of a registry that does not
// exist: serve never creates one.
var ErrNoRegistry = errors.New("the control registry does not exist")

// ErrRegistryExists is wrapped by Init's refusal of a registry that
// exists already.
var ErrRegistryExists = errors.New("the control registry exists already")

// ErrRegistryHeld is wrapped by Open's refusal of a registry another
// process holds.
var ErrRegistryHeld = errors.New("another process holds the control registry")

const registrySchema = `
CREATE TABLE registry (
	id         INTEGER PRIMARY KEY CHECK (id = 1),
	format     INTEGER NOT NULL,
	broker_id  TEXT NOT NULL,
	revision   INTEGER NOT NULL, -- the collection's: bumped by every mutation that changes a stream
	op_seq     INTEGER NOT NULL  -- the last operation's sequence number
);
CREATE TABLE streams (
	name        TEXT PRIMARY KEY,
	declaration TEXT NOT NULL,   -- the Declaration, as JSON
	desired     TEXT NOT NULL,   -- serving, stopped or retired
	revision    INTEGER NOT NULL,
	stream_id   TEXT NOT NULL DEFAULT '' -- bound once the stream first served
);
CREATE TABLE operations (
	id        TEXT PRIMARY KEY,
	seq       INTEGER NOT NULL UNIQUE,
	stream    TEXT NOT NULL,
	kind      TEXT NOT NULL,
	revision  INTEGER NOT NULL,  -- the stream's revision the operation made (or found, for a no-op)
	target    TEXT NOT NULL,     -- what the operation moves the stream to, as JSON
	status    TEXT NOT NULL,
	error     TEXT NOT NULL DEFAULT '',
	created   INTEGER NOT NULL,  -- Unix seconds
	updated   INTEGER NOT NULL
);
CREATE INDEX operations_pending ON operations (status, seq);
CREATE TABLE receipts (
	principal   TEXT NOT NULL,
	key         TEXT NOT NULL,
	hash        TEXT NOT NULL,  -- of the method, resource, body and preconditions
	status      INTEGER NOT NULL,
	body        BLOB NOT NULL,
	location    TEXT NOT NULL,
	etag        TEXT NOT NULL,
	created     INTEGER NOT NULL DEFAULT 0, -- Unix seconds; pruned after ReceiptRetention
	PRIMARY KEY (principal, key)
);
CREATE INDEX receipts_created ON receipts (created);
`

// Registry is the control registry: a SQLite file holding each
// registered stream's declaration, desired state, revision and bound
// identity, and every operation with its idempotency receipt: receipts
// for ReceiptRetention, finished operations for OperationRetention (a
// no-op records none). One process holds it at a time (a lock file beside
// it).
type Registry struct {
	db       *sql.DB
	lock     *logstore.Lock
	brokerID string
}

// Init creates the registry at path, with a new broker id. It refuses a
// path that exists: a registry is made once, by `streamcast control init`.
func Init(ctx context.Context, path string) (brokerID string, err error) {
	if _, err := os.Stat(path); err == nil {
		return "", fmt.Errorf("%w at %s; it is kept as it is (serve uses it as found)", ErrRegistryExists, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("create the control registry's directory: %w", err)
	}
	// Exclusive create first, so two inits racing cannot both succeed.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("%w at %s", ErrRegistryExists, path)
		}
		return "", fmt.Errorf("create the control registry: %w", err)
	}
	_ = f.Close()
	db, err := openDB(path)
	if err != nil {
		_ = os.Remove(path)
		return "", err
	}
	defer db.Close()
	brokerID = newID()
	tx, err := db.BeginTx(ctx, nil)
	if err == nil {
		if _, err = tx.ExecContext(ctx, registrySchema); err == nil {
			_, err = tx.ExecContext(ctx, `INSERT INTO registry (id, format, broker_id, revision, op_seq) VALUES (1, ?, ?, 0, 0)`, registryFormat, brokerID)
		}
		if err == nil {
			err = tx.Commit()
		} else {
			_ = tx.Rollback()
		}
	}
	if err != nil {
		_ = db.Close()
		_ = os.Remove(path)
		return "", fmt.Errorf("create the control registry: %w", err)
	}
	return brokerID, nil
}

// Open opens the registry at path, which Init made, and takes its lock.
// It never creates one. path comes from the config (RegistryPath), which
// spells the default place: control never names a file under the root.
func Open(ctx context.Context, path string) (*Registry, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w at %s; create it once with `streamcast control init`", ErrNoRegistry, path)
		}
		return nil, fmt.Errorf("open the control registry: %w", err)
	}
	lock, err := logstore.Try(path + ".lock")
	if err != nil {
		if errors.Is(err, logstore.ErrHeld) {
			return nil, fmt.Errorf("%w (pid %d); one serve manages a registry at a time", ErrRegistryHeld, logstore.Holder(path+".lock"))
		}
		return nil, fmt.Errorf("lock the control registry: %w", err)
	}
	db, err := openDB(path)
	if err != nil {
		lock.Release()
		return nil, err
	}
	r := &Registry{db: db, lock: lock}
	var format int
	err = db.QueryRowContext(ctx, `SELECT format, broker_id FROM registry WHERE id = 1`).Scan(&format, &r.brokerID)
	switch {
	case err != nil:
		err = fmt.Errorf("read the control registry (is it one `streamcast control init` made?): %w", err)
	case format != registryFormat:
		err = fmt.Errorf("the control registry has format %d; this streamcast reads format %d", format, registryFormat)
	}
	if err == nil {
		err = upgradeReceipts(ctx, db)
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// upgradeReceipts gives a registry made before receipts were pruned their
// created column, in place: the format stays 1, since a build without
// pruning reads and writes the table unchanged (the column has a
// default). Receipts already there count from now, so none is dropped
// before a full ReceiptRetention.
func upgradeReceipts(ctx context.Context, db *sql.DB) error {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('receipts') WHERE name = 'created'`).Scan(&n); err != nil {
		return fmt.Errorf("read the control registry's receipts table: %w", err)
	}
	if n > 0 {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("upgrade the control registry's receipts: %w", err)
	}
	for _, q := range []string{
		`ALTER TABLE receipts ADD COLUMN created INTEGER NOT NULL DEFAULT 0`,
		`CREATE INDEX IF NOT EXISTS receipts_created ON receipts (created)`,
	} {
		if _, err = tx.ExecContext(ctx, q); err != nil {
			break
		}
	}
	if err == nil {
		_, err = tx.ExecContext(ctx, `UPDATE receipts SET created = ?`, now())
	}
	if err == nil {
		err = tx.Commit()
	} else {
		_ = tx.Rollback()
	}
	if err != nil {
		return fmt.Errorf("upgrade the control registry's receipts (add the column pruning reads): %w", err)
	}
	return nil
}

func openDB(path string) (*sql.DB, error) {
	// Commit with fdatasync, as buffer.db does (see logstore's
	// syncWithFdatasync): the same durability for less journal work.
	_, _ = sqlite.Fdatasync(true)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(ON)")
	if err != nil {
		return nil, fmt.Errorf("open the control registry: %w", err)
	}
	// One connection: every transaction is serialised in this process,
	// which is what makes a precondition check and its write one step.
	db.SetMaxOpenConns(1)
	return db, nil
}

// Close closes the database and releases the lock.
func (r *Registry) Close() error {
	err := r.db.Close()
	r.lock.Release()
	return err
}

// BrokerID is the id Init minted for this registry.
func (r *Registry) BrokerID() string { return r.brokerID }

// newID returns 16 random bytes in hex.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// now is Unix seconds.
func now() int64 { return time.Now().Unix() }

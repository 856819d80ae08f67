package logstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/streamcast/streamcast/internal/durable"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// This file is the record API the maintenance steps (seal.go, compact.go,
// publish.go, clean.go, ...) work through: the role locks, buffer.db's
// write transaction and the published table handle.

// Acquire takes the locks of roles on a log open for writing: each role's
// mutex, then its lock file, so one goroutine of one process runs each at
// a time. It takes them in the order of the Role constants, whatever order
// they are named in, so two steps never wait for each other. It fails
// with an error wrapping ErrClosed or ErrReadOnly, or ErrBusy (naming the
// holder's pid) when another process holds a role; then it holds nothing.
// release frees them all.
func (l *Log) Acquire(roles ...Role) (release func(), err error) {
	if err := l.checkOpen(); err != nil {
		return nil, err
	}
	if l.mode == ReadOnly {
		return nil, ErrReadOnly
	}
	order := [...]Role{RoleSeal, RoleCompact, RoleClean, RolePublish, RoleCleanPublished}
	for _, r := range roles {
		if !slices.Contains(order[:], r) {
			return nil, fmt.Errorf("no maintenance role %q", r)
		}
	}
	var held []func()
	release = func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i]()
		}
	}
	for i, role := range order {
		if !slices.Contains(roles, role) {
			continue
		}
		mu := &l.roleMus[i]
		mu.Lock()
		lk, err := l.roleLock(role)
		if err != nil {
			mu.Unlock()
			release()
			return nil, err
		}
		held = append(held, func() { lk.Release(); mu.Unlock() })
	}
	return release, nil
}

// roleLock takes <log>/<role>.lock, refusing with ErrBusy when another
// process holds it.
func (l *Log) roleLock(role Role) (*fileLock, error) {
	path := filepath.Join(l.dir, string(role)+".lock")
	lk, err := tryLock(path)
	if err != nil {
		var le *LockedError
		if errors.As(err, &le) {
			if le.PID > 0 {
				return nil, fmt.Errorf("%w: pid %d holds %s", ErrBusy, le.PID, path)
			}
			return nil, fmt.Errorf("%w: %s is held", ErrBusy, path)
		}
		return nil, err
	}
	return lk, nil
}

// CommitLock serialises commits to the published table between the
// processes maintaining one log (publish, clean-published and
// delete-below all commit): the hadoop catalog's commit is a rename, which
// an object store does not make atomic, so two commits must never overlap.
// It waits for the lock until ctx ends, and returns the function that
// releases it.
func (l *Log) CommitLock(ctx context.Context) (release func(), err error) {
	path := filepath.Join(l.dir, "commit.lock")
	for {
		lk, err := tryLock(path)
		if err == nil {
			return lk.Release, nil
		}
		var le *LockedError
		if !errors.As(err, &le) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for %s (held by pid %d): %w", path, le.PID, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// querier reads buffer.db's records: a *recordTx, or records for reads outside
// a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// records returns the read-only view of buffer.db's records (docs/design.md
// §4.4): files, published, the intents and the delete queue. Each query
// sees one snapshot; a step that decides on what it reads and writes the
// decision uses update instead.
func (l *Log) records() querier { return l.rdb }

// recordTx is one write transaction on buffer.db, through the handle's single
// write connection. It is valid only inside the function passed to update.
type recordTx struct {
	c *sql.Conn
}

// ExecContext runs a statement inside the transaction.
func (tx *recordTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return tx.c.ExecContext(ctx, query, args...)
}

// QueryContext runs a query inside the transaction.
func (tx *recordTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return tx.c.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a one-row query inside the transaction.
func (tx *recordTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return tx.c.QueryRowContext(ctx, query, args...)
}

// sealedEnd is Log.SealedEnd inside the transaction; ok=false when no file
// was ever made.
func (tx *recordTx) sealedEnd(ctx context.Context) (end int64, ok bool, err error) {
	return sealedEnd(ctx, tx.c, true)
}

// update runs fn inside one BEGIN IMMEDIATE transaction on buffer.db,
// committing when fn returns nil and rolling back otherwise. Appends wait
// for it, so fn should be short. A read-only handle gets ErrReadOnly.
func (l *Log) update(ctx context.Context, fn func(tx *recordTx) error) error {
	return l.writeTx(ctx, func(c *sql.Conn) error { return fn(&recordTx{c: c}) })
}

// Now is the time on the handle's clock (WithClock).
func (l *Log) Now() time.Time { return l.now() }

// PublishedTable returns the handle of the log's published table, made on
// first use and closed with the log.
func (l *Log) PublishedTable() (*warehouse.Table, error) { return l.published() }

// TableOwner is the log as the owner of its published table: a table
// another log created is refused (I8).
func (l *Log) TableOwner() warehouse.Owner { return l.owner() }

// FileSchema returns the Arrow schema of the log's data files:
// streamcast_offset, streamcast_ts, then the declared columns (or the row
// column), with the published table's field ids.
func (l *Log) FileSchema() *arrow.Schema { return l.fileSc }

// FilesDir returns the directory of the log's local files.
func (l *Log) FilesDir() string { return filepath.Join(l.dir, FilesDir) }

// recoverIfIdle runs seal recovery when no process is sealing.
func (l *Log) recoverIfIdle(ctx context.Context) error {
	release, err := l.Acquire(RoleSeal)
	if errors.Is(err, ErrBusy) {
		return nil // the live sealer recovers at its next pass
	}
	if err != nil {
		return err
	}
	defer release()
	return l.RecoverSeals(ctx)
}

// sealName matches the names seal gives files: <start>-<end>-<token>.parquet.
var sealName = regexp.MustCompile(`^[0-9]+-[0-9]+-[0-9a-f]{16}\.parquet$`)

// RecoverSeals undoes seals that recorded an intent but never completed:
// their file (whole or partial) is deleted and the intent dropped, so the
// range is sealed again under a fresh name. It also deletes seal-named
// files that neither a completion nor an intent mentions. The caller holds
// the seal role (Acquire), so no live sealer owns any of them; Open runs
// it too, when no process is sealing.
func (l *Log) RecoverSeals(ctx context.Context) error {
	type intent struct {
		name       string
		start, end int64
	}
	var intents []intent
	rows, err := l.rdb.QueryContext(ctx, `SELECT name, start_offset, end_offset FROM seal_intents`)
	if err != nil {
		return fmt.Errorf("read seal intents: %w", err)
	}
	for rows.Next() {
		var it intent
		if err := rows.Scan(&it.name, &it.start, &it.end); err != nil {
			rows.Close()
			return fmt.Errorf("read seal intents: %w", err)
		}
		intents = append(intents, it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read seal intents: %w", err)
	}
	dir := filepath.Join(l.dir, FilesDir)
	for _, it := range intents {
		// Delete the file before forgetting the intent: the reverse order
		// would leave a file nobody knows about if we crash in between.
		if err := os.Remove(filepath.Join(dir, it.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s left by an interrupted seal of [%d,%d): %w", it.name, it.start, it.end, err)
		}
		if err := durable.SyncDir(dir); err != nil {
			return err
		}
		err := l.writeTx(ctx, func(c *sql.Conn) error {
			_, err := c.ExecContext(ctx, `DELETE FROM seal_intents WHERE name = ?`, it.name)
			return err
		})
		if err != nil {
			return fmt.Errorf("drop intent of interrupted seal %s: %w", it.name, err)
		}
	}
	// Seal-named files no record mentions: a seal only creates a file after
	// recording its intent, so these come from outside or from a bug; they
	// would otherwise stay forever.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	known, err := nameSet(ctx, l.rdb, `SELECT name FROM files UNION ALL SELECT name FROM seal_intents
		UNION ALL SELECT name FROM compact_intents UNION ALL SELECT path FROM delete_queue WHERE tier = 'local'`)
	if err != nil {
		return err
	}
	removed := false
	for _, e := range entries {
		if !e.Type().IsRegular() || !sealName.MatchString(e.Name()) || known[e.Name()] {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove orphaned file %s: %w", e.Name(), err)
		}
		removed = true
	}
	if removed {
		return durable.SyncDir(dir)
	}
	return nil
}

// nameSet runs query, which selects one text column of file names or
// paths, and returns them as a set.
func nameSet(ctx context.Context, q querier, query string) (map[string]bool, error) {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("read file records: %w", err)
	}
	defer rows.Close()
	known := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("read file records: %w", err)
		}
		known[n] = true
	}
	return known, rows.Err()
}

// NewToken returns 16 fresh random hex digits, for names that must never
// repeat (a file's, a publish pass's). crypto/rand never fails on the
// platforms streamcast runs on (it would crash the process first).
func NewToken() string {
	var tok [8]byte
	_, _ = rand.Read(tok[:])
	return hex.EncodeToString(tok[:])
}

// ErrUnsealed is wrapped by IngestStart's refusal: rows buffered in no file.
var ErrUnsealed = errors.New("the buffer holds rows that are not in files yet")

// IngestStart returns the writer's next offset, where a bulk load written
// straight to files starts (Ingest), once the log is not fenced and
// every row below it is in a file or a recorded hole (a restore's fence).
// The caller holds RoleSeal and recovered.
func (l *Log) IngestStart(ctx context.Context) (int64, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.fenced != 0 {
		return 0, &FencedError{Dir: l.dir, End: l.fenced}
	}
	sealed, ok, err := sealedEnd(ctx, l.rdb, l.tiers)
	if err != nil {
		return 0, fmt.Errorf("ingest into log %s: %w", l.dir, err)
	} else if !ok {
		sealed = l.cfg.Start
	}
	if sealed != l.next {
		// After a restore the files end where the fence's hole starts and
		// the next offset is its end: nothing lies between them but the
		// hole, so a bulk load starts past it and the hole stays recorded.
		hs, err := readHoles(ctx, l.rdb)
		if err != nil {
			return 0, fmt.Errorf("ingest into log %s: %w", l.dir, err)
		}
		if !holeSpans(hs, sealed, l.next) {
			return 0, fmt.Errorf("ingest into log %s: offsets [%d,%d) are buffered but in no file: %w; seal them first", l.dir, sealed, l.next, ErrUnsealed)
		}
	}
	return l.next, nil
}

// AdvanceNext runs fn (which records a file of offsets [start, end) a bulk
// load wrote) in one transaction that moves the next offset from start to
// end, in buffer.db and the Writer's memory (I1); ErrCorrupt when files or
// the next offset no longer end at start: another process wrote to the log.
func (l *Log) AdvanceNext(ctx context.Context, start, end int64, fn func(tx *recordTx) error) error {
	if l.mode != Writer {
		return fmt.Errorf("record ingested offsets in log %s (open as %s): %w", l.dir, l.mode, ErrNotWriter)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	err := l.writeTxLocked(ctx, func(c *sql.Conn) error {
		var next int64
		sealed, ok, err := sealedEnd(ctx, c, l.tiers)
		if err == nil {
			err = c.QueryRowContext(ctx, `SELECT `+endSQL).Scan(&next)
		}
		if err != nil {
			return err
		}
		if ok && sealed != start {
			// Only a recorded hole may lie between the files and start
			// (IngestStart).
			hs, err := readHoles(ctx, c)
			if err != nil {
				return err
			}
			if holeSpans(hs, sealed, start) {
				sealed = start
			}
		}
		if (ok && sealed != start) || next != start {
			return fmt.Errorf("the files now end at %d and the next offset is %d, not %d: another process wrote to the log: %w", sealed, next, start, ErrCorrupt)
		}
		if err := fn(&recordTx{c: c}); err != nil {
			return err
		}
		_, err = c.ExecContext(ctx, `UPDATE meta SET v = ? WHERE k = 'next_offset'`, end)
		return err
	})
	if err == nil {
		l.next = end
	}
	return err
}

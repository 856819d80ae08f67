package control

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/streamcast/streamcast/pkg/meta"
)

// Desired states a registered stream may be set to.
const (
	Serving = "serving"
	Stopped = "stopped"
	Retired = "retired" // terminal: replay only, no writes, never undone over HTTP
)

// Operation statuses, in the order an operation moves through them.
const (
	StatusAccepted  = "accepted"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// Operation kinds.
const (
	KindCreate  = "create"
	KindReplace = "replace"
	KindDesired = "desired"
	KindMigrate = "migrate"
)

// Record is one registered stream as the registry holds it.
type Record struct {
	Name        string
	Declaration Declaration
	Desired     string
	Revision    int64
	StreamID    string // "" until the stream first served
}

// Operation is one accepted change and how far it got.
type Operation struct {
	ID       string          `json:"id"`
	Stream   string          `json:"name"`
	Kind     string          `json:"kind"`
	Revision int64           `json:"revision"`
	Target   json.RawMessage `json:"target"`
	Status   string          `json:"status"`
	Error    *ErrorBody      `json:"error"`
	Created  int64           `json:"created"`
	Updated  int64           `json:"updated"`
	seq      int64
}

// Receipt is what a mutation answered, kept under its idempotency key so
// an identical retry gets the same answer.
type Receipt struct {
	Hash     string
	Status   int
	Body     []byte
	Location string
	ETag     string
}

// tx is one registry transaction. The registry has one connection, so a
// tx is the only writer while it is open: a precondition read in it still
// holds when it commits.
type tx struct {
	*sql.Tx
	ctx context.Context
}

// update runs f in one transaction and commits it when f returns nil.
func (r *Registry) update(ctx context.Context, f func(t tx) error) error {
	stx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("control registry: %w", err)
	}
	if err := f(tx{stx, ctx}); err != nil {
		_ = stx.Rollback()
		return err
	}
	if err := stx.Commit(); err != nil {
		return fmt.Errorf("control registry: commit: %w", err)
	}
	return nil
}

// read runs f in a transaction that is rolled back: a consistent view.
func (r *Registry) read(ctx context.Context, f func(t tx) error) error {
	stx, err := r.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("control registry: %w", err)
	}
	defer stx.Rollback() //nolint:errcheck // read only
	return f(tx{stx, ctx})
}

func (t tx) stream(name string) (*Record, error) {
	rec, err := scanRecord(t.QueryRowContext(t.ctx, `SELECT `+recordCols+` FROM streams WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return rec, err
}

// streamFolded returns the registered stream whose name differs from name
// only in case (by meta.Fold), "" for none. Stream names are ASCII
// (meta.CheckName), so SQLite's lower() folds them as meta.Fold does.
func (t tx) streamFolded(name string) (string, error) {
	var other string
	err := t.QueryRowContext(t.ctx, `SELECT name FROM streams WHERE lower(name) = ? AND name <> ? ORDER BY name LIMIT 1`, meta.Fold(name), name).Scan(&other)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("control registry: look for a stream named %q in another case: %w", name, err)
	}
	return other, nil
}

const recordCols = `name, declaration, desired, revision, stream_id`

// scanRecord reads one row of recordCols.
func scanRecord(row interface{ Scan(...any) error }) (*Record, error) {
	var rec Record
	var decl string
	if err := row.Scan(&rec.Name, &decl, &rec.Desired, &rec.Revision, &rec.StreamID); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		return nil, fmt.Errorf("control registry: read stream: %w", err)
	}
	if err := json.Unmarshal([]byte(decl), &rec.Declaration); err != nil {
		return nil, fmt.Errorf("control registry: stream %q: its declaration does not decode: %w", rec.Name, err)
	}
	return &rec, nil
}

func (t tx) putStream(rec *Record) error {
	decl, err := json.Marshal(rec.Declaration)
	if err != nil {
		return err
	}
	_, err = t.ExecContext(t.ctx, `INSERT INTO streams (name, declaration, desired, revision, stream_id) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET declaration = excluded.declaration, desired = excluded.desired, revision = excluded.revision, stream_id = excluded.stream_id`,
		rec.Name, string(decl), rec.Desired, rec.Revision, rec.StreamID)
	if err != nil {
		return fmt.Errorf("control registry: write stream: %w", err)
	}
	return nil
}

// collection returns the collection's revision.
func (t tx) collection() (int64, error) {
	var rev int64
	err := t.QueryRowContext(t.ctx, `SELECT revision FROM registry WHERE id = 1`).Scan(&rev)
	return rev, err
}

// bumpCollection moves the collection's revision on: every cursor issued
// before is stale.
func (t tx) bumpCollection() error {
	_, err := t.ExecContext(t.ctx, `UPDATE registry SET revision = revision + 1 WHERE id = 1`)
	return err
}

func (t tx) receipt(principal, key string) (*Receipt, error) {
	var rc Receipt
	err := t.QueryRowContext(t.ctx, `SELECT hash, status, body, location, etag FROM receipts WHERE principal = ? AND key = ?`, principal, key).
		Scan(&rc.Hash, &rc.Status, &rc.Body, &rc.Location, &rc.ETag)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("control registry: read receipt: %w", err)
	}
	return &rc, nil
}

func (t tx) putReceipt(principal, key string, rc *Receipt) error {
	_, err := t.ExecContext(t.ctx, `INSERT INTO receipts (principal, key, hash, status, body, location, etag, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		principal, key, rc.Hash, rc.Status, rc.Body, rc.Location, rc.ETag, now())
	if err != nil {
		return fmt.Errorf("control registry: write receipt: %w", err)
	}
	return nil
}

// How long the registry keeps what only a client's retry or poll reads.
// Without a bound, every mutation a client sends grows the registry for
// ever, a no-op as much as a change.
const (
	// ReceiptRetention is how long an idempotency receipt is kept: an
	// identical retry within it gets the first answer; after it the
	// request is judged afresh (a create then finds the stream and gets
	// 412, a no-op is a no-op again).
	ReceiptRetention = 24 * time.Hour
	// OperationRetention is how long a finished (succeeded or failed)
	// operation is kept for GET /control/v1/operations/{id}. An
	// operation still pending is never pruned: the worker runs it.
	OperationRetention = 7 * 24 * time.Hour
)

// prune deletes the receipts older than ReceiptRetention and the finished
// operations older than OperationRetention at the time at, and reports
// how many of each went.
func (r *Registry) prune(ctx context.Context, at time.Time) (receipts, ops int64, err error) {
	err = r.update(ctx, func(t tx) error {
		res, err := t.ExecContext(t.ctx, `DELETE FROM receipts WHERE created < ?`, at.Add(-ReceiptRetention).Unix())
		if err != nil {
			return fmt.Errorf("control registry: prune receipts: %w", err)
		}
		receipts, _ = res.RowsAffected()
		res, err = t.ExecContext(t.ctx, `DELETE FROM operations WHERE status IN (?, ?) AND updated < ?`, StatusSucceeded, StatusFailed, at.Add(-OperationRetention).Unix())
		if err != nil {
			return fmt.Errorf("control registry: prune operations: %w", err)
		}
		ops, _ = res.RowsAffected()
		return nil
	})
	return receipts, ops, err
}

// pending counts the operations accepted and not finished.
func (t tx) pending() (int, error) {
	var n int
	err := t.QueryRowContext(t.ctx, `SELECT count(*) FROM operations WHERE status IN (?, ?)`, StatusAccepted, StatusRunning).Scan(&n)
	return n, err
}

// pendingOf returns the stream's unfinished operation, nil for none.
func (t tx) pendingOf(name string) (*Operation, error) {
	return t.oneOp(`SELECT `+opCols+` FROM operations WHERE stream = ? AND status IN (?, ?) ORDER BY seq LIMIT 1`, name, StatusAccepted, StatusRunning)
}

// newOp records an operation with status (a no-op records none).
func (t tx) newOp(stream, kind string, revision int64, target any, status string) (*Operation, error) {
	tgt, err := json.Marshal(target)
	if err != nil {
		return nil, err
	}
	if _, err := t.ExecContext(t.ctx, `UPDATE registry SET op_seq = op_seq + 1 WHERE id = 1`); err != nil {
		return nil, err
	}
	var seq int64
	if err := t.QueryRowContext(t.ctx, `SELECT op_seq FROM registry WHERE id = 1`).Scan(&seq); err != nil {
		return nil, err
	}
	ts := now()
	op := &Operation{ID: newID(), Stream: stream, Kind: kind, Revision: revision, Target: tgt, Status: status, Created: ts, Updated: ts, seq: seq}
	_, err = t.ExecContext(t.ctx, `INSERT INTO operations (id, seq, stream, kind, revision, target, status, created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		op.ID, op.seq, op.Stream, op.Kind, op.Revision, string(op.Target), op.Status, op.Created, op.Updated)
	if err != nil {
		return nil, fmt.Errorf("control registry: write operation: %w", err)
	}
	return op, nil
}

const opCols = `id, seq, stream, kind, revision, target, status, error, created, updated`

func (t tx) oneOp(q string, args ...any) (*Operation, error) {
	var op Operation
	var target, errText string
	err := t.QueryRowContext(t.ctx, q, args...).Scan(&op.ID, &op.seq, &op.Stream, &op.Kind, &op.Revision, &target, &op.Status, &errText, &op.Created, &op.Updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("control registry: read operation: %w", err)
	}
	op.Target = json.RawMessage(target)
	if errText != "" {
		op.Error = &ErrorBody{Code: "transition_failed", Message: errText, OperationID: &op.ID}
	}
	return &op, nil
}

// Operation returns the operation id, nil when there is none.
func (r *Registry) Operation(ctx context.Context, id string) (op *Operation, err error) {
	err = r.read(ctx, func(t tx) error {
		op, err = t.oneOp(`SELECT `+opCols+` FROM operations WHERE id = ?`, id)
		return err
	})
	return op, err
}

// nextPending returns the oldest unfinished operation, nil for none.
func (r *Registry) nextPending(ctx context.Context) (op *Operation, err error) {
	err = r.read(ctx, func(t tx) error {
		op, err = t.oneOp(`SELECT `+opCols+` FROM operations WHERE status IN (?, ?) ORDER BY seq LIMIT 1`, StatusAccepted, StatusRunning)
		return err
	})
	return op, err
}

// pendingOps returns every unfinished operation, oldest first.
func (r *Registry) pendingOps(ctx context.Context) (ops []*Operation, err error) {
	err = r.read(ctx, func(t tx) error {
		var ids []string
		rows, err := t.QueryContext(t.ctx, `SELECT id FROM operations WHERE status IN (?, ?) ORDER BY seq`, StatusAccepted, StatusRunning)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range ids {
			op, err := t.oneOp(`SELECT `+opCols+` FROM operations WHERE id = ?`, id)
			if err != nil {
				return err
			}
			ops = append(ops, op)
		}
		return nil
	})
	return ops, err
}

// setStatus records how far an operation got; msg is the failure's.
func (t tx) setStatus(id, status, msg string) error {
	_, err := t.ExecContext(t.ctx, `UPDATE operations SET status = ?, error = ?, updated = ? WHERE id = ?`, status, msg, now(), id)
	if err != nil {
		return fmt.Errorf("control registry: update operation: %w", err)
	}
	return nil
}

// Streams returns every registered stream, by name.
func (r *Registry) Streams(ctx context.Context) ([]Record, error) {
	recs, _, err := r.page(ctx, "", -1, nil)
	return recs, err
}

// namesAfter returns up to limit stream names after after (all for limit
// < 0) that keep admits (all for nil keep), in order.
func (t tx) namesAfter(after string, limit int, keep func(name string) bool) ([]string, error) {
	rows, err := t.QueryContext(t.ctx, `SELECT name FROM streams WHERE name > ? ORDER BY name`, after)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for (limit < 0 || len(names) < limit) && rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		if keep == nil || keep(name) {
			names = append(names, name)
		}
	}
	return names, rows.Err()
}

// page returns up to limit streams named after after (all for limit < 0)
// that keep admits (all for nil keep), and the collection revision they
// were read at. The filter runs here, before the limit, so that a page and
// whatever the caller derives from its last record (a cursor) hold only
// streams keep admits: a stream the caller may not see never shapes what
// it is answered.
func (r *Registry) page(ctx context.Context, after string, limit int, keep func(name string) bool) (recs []Record, rev int64, err error) {
	err = r.read(ctx, func(t tx) error {
		if rev, err = t.collection(); err != nil {
			return err
		}
		// Names first, then the records kept: a declaration may be a few
		// hundred kilobytes, and one the caller may not see is never decoded.
		names, err := t.namesAfter(after, limit, keep)
		if err != nil {
			return err
		}
		for _, name := range names {
			rec, err := t.stream(name)
			if err != nil {
				return err
			}
			if rec != nil {
				recs = append(recs, *rec)
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("control registry: list streams: %w", err)
	}
	return recs, rev, nil
}

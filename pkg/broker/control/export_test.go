package control

import (
	"context"
	"time"
)

// SetAfterCommit makes fn the hook called after a mutation's transaction
// commits and before its answer is written, until restore is called. Set
// it before the server starts and restore it after the server stops.
func SetAfterCommit(fn func()) (restore func()) {
	old := testHookAfterCommit
	testHookAfterCommit = fn
	return func() { testHookAfterCommit = old }
}

// SetBeforeRun makes fn the hook called with an operation's kind once it
// is marked running and before it does anything, until restore is called.
// Set it before the server starts and restore it after the server stops.
func SetBeforeRun(fn func(kind string)) (restore func()) {
	old := testHookBeforeRun
	testHookBeforeRun = fn
	return func() { testHookBeforeRun = old }
}

// PruneAt runs the worker's pruning as if the clock read at.
func PruneAt(ctx context.Context, r *Registry, at time.Time) (receipts, ops int64, err error) {
	return r.prune(ctx, at)
}

// Sizes counts the registry's operations and receipts.
func Sizes(ctx context.Context, r *Registry) (ops, receipts int, err error) {
	err = r.read(ctx, func(t tx) error {
		if err := t.QueryRowContext(t.ctx, `SELECT count(*) FROM operations`).Scan(&ops); err != nil {
			return err
		}
		return t.QueryRowContext(t.ctx, `SELECT count(*) FROM receipts`).Scan(&receipts)
	})
	return ops, receipts, err
}

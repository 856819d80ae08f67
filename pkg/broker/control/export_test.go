package control

import (
	"context"
	"time"
)

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

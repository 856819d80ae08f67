package logstore

import (
	"context"
	"errors"
	"fmt"
)

// PublishAll seals every buffered row and publishes every file, and
// returns the log's end once the published table holds every offset from
// the log's first up to it. It is the offline form of a flush, for a
// command run while the server is stopped: it holds the seal, compact and
// publish role locks for its whole run, and fails at once with logstore.ErrBusy,
// naming the holder's pid, while a maintenance process holds one. Each
// pass is the role's own (intent, file, completion), so a run killed at
// any point is finished by the next. Rows appended meanwhile through this
// handle are published too, up to the end read after the last pass.
func (l *Log) PublishAll(ctx context.Context) (end int64, err error) {
	release, err := l.Acquire(RoleSeal, RoleCompact, RolePublish)
	switch {
	case errors.Is(err, ErrClosed):
		return 0, err
	case errors.Is(err, ErrReadOnly):
		return 0, fmt.Errorf("publish all of log %s: %w", l.Dir(), err)
	case err != nil:
		return 0, fmt.Errorf("publish all of log %s: a maintenance process is running (stop the server and its maintain children first): %w", l.Dir(), err)
	}
	defer release()
	pt, err := l.PublishedTable()
	if err != nil {
		return 0, err
	}
	for {
		_, end, err = l.Extent(ctx)
		if err != nil {
			return 0, err
		}
		through, err := l.PublishedThrough(ctx)
		if err != nil {
			return 0, fmt.Errorf("publish all of log %s: %w", l.Dir(), err)
		}
		if through+1 >= end || end == l.Config().Start {
			return end, nil
		}
		if hs, err := l.Holes(ctx); err != nil {
			return 0, fmt.Errorf("publish all of log %s: %w", l.Dir(), err)
		} else if holeSpans(hs, through+1, end) {
			return end, nil // only a restore's hole lies past the table
		}
		if err := l.RecoverSeals(ctx); err != nil {
			return 0, fmt.Errorf("publish all of log %s: %w", l.Dir(), err)
		}
		if _, err := sealAll(ctx, l, true); err != nil {
			return 0, fmt.Errorf("publish all of log %s: %w", l.Dir(), err)
		}
		if err := l.atCrashPoint("publish-all:sealed"); err != nil {
			return 0, err
		}
		n, err := publishPass(ctx, l, pt, true)
		if err != nil {
			return 0, fmt.Errorf("publish all of log %s: %w", l.Dir(), err)
		}
		if n == 0 {
			// A flush pass that publishes nothing while rows are missing
			// from the table would loop for ever: say what is missing.
			if through2, err := l.PublishedThrough(ctx); err == nil && through2+1 < end {
				return 0, fmt.Errorf("publish all of log %s: the table holds offsets through %d of [%d,%d), and a flush pass published nothing more: %w", l.Dir(), through2, l.Config().Start, end, ErrCorrupt)
			}
		}
	}
}

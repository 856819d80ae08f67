package cmd

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/streamcast/streamcast/pkg/wire/txbox"
)

// outboxRun is `publish --from-outbox DSN --publisher ID URL`: the outbox
// sender of pkg/wire/txbox as a process, for applications in other
// languages that write the outbox tables themselves (txbox.DDL).
type outboxRun struct {
	dsn           string
	publisher     string
	url           string
	batchRows     int
	maxInFlight   int
	maxFrameBytes int
	untilEmpty    bool
}

func (r outboxRun) run(ctx context.Context, a *app) error {
	db, d, err := txbox.OpenDSN(r.dsn)
	if err != nil {
		return usageError{fmt.Errorf("--from-outbox: %w", err)}
	}
	defer db.Close()
	logger := slog.New(a.logger) // the configured log, as a slog handler
	o, err := txbox.NewOutbox(db, d, r.url, r.publisher, txbox.OutboxOptions{
		BatchRows:     r.batchRows,
		MaxInFlight:   r.maxInFlight,
		MaxFrameBytes: r.maxFrameBytes,
		Logger:        logger,
	})
	if err != nil {
		return err
	}
	if r.untilEmpty {
		ferr := o.Flush(ctx)
		cerr := o.Close()
		if ferr != nil {
			return ferr
		}
		if cerr != nil {
			return cerr
		}
		fmt.Fprintf(a.stderr, "publish: the outbox of publisher %q is empty\n", r.publisher)
		return nil
	}
	a.logger.Printf("publish: sending the outbox of publisher %q to %s until SIGINT or SIGTERM", r.publisher, r.url)
	select {
	case <-ctx.Done():
	case <-o.Done():
	}
	if err := o.Close(); err != nil {
		return err
	}
	n, err := o.Pending(context.Background())
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "publish: stopped; %d rows of publisher %q wait in the outbox for the next run\n", n, r.publisher)
	return nil
}

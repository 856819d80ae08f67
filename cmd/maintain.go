package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/logstore"
)

func newMaintainCmd(a *app) *cobra.Command {
	var (
		every, flushEvery time.Duration
		logs              []string
		over              logstore.Config
		readyFD           int
	)
	roles := make([]string, len(logstore.Roles))
	for i, r := range logstore.Roles {
		roles[i] = string(r)
	}
	role := newChoice("role", "", roles)
	cmd := &cobra.Command{
		Use:   "maintain --role ROLE --every DUR --log PATH...",
		Short: "Run one maintenance role over logs in a loop (started by serve)",
		Long: `Run one maintenance role over one or more logs, a pass over every log each
--every, beside the serve process that writes them. serve starts one
maintain process per role; run one by hand to catch up a log whose server
is stopped, or to run the roles on a schedule of your own.

Roles:
  seal             turn buffered rows into Parquet files under <log>/files/, a
                   full target at a time; once per --flush-every (at wall-clock
                   multiples of it) seal everything buffered
  compact          merge adjacent small files into larger ones (the log's
                   target_file_bytes, 512 MiB by default)
  publish          push finished files into the log's Iceberg table, one commit
                   per pass; once per --flush-every push every file
  clean            delete buffered rows that files hold, and local files that
                   are published and past staging_retention (or beyond
                   staging_max_bytes); delete what the delete queue holds
                   once its grace is over
  clean-published  expire snapshots of the published table past
                   published_snapshot_retention, and delete the objects no
                   snapshot references any more once their grace is over

Retention, grace and S3 settings are stored in each log when it is created;
the flags below override them for this process. S3 credentials come only
from the standard AWS environment variables (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) or profile (AWS_PROFILE), never
from flags.

A failed pass is logged and retried on the next one; nothing is lost by a
retry. SIGTERM or SIGINT ends the loop after the pass in progress; SIGUSR1
runs a flushing pass at once. With --ready-fd, "ready" is written to that
file descriptor once every log is open, and "flushed" after each pass that
SIGUSR1 asked for. Two processes never run one role on one log at the same
time: each role holds <log>/<role>.lock while it works, and the other skips
its pass.`,
		Example: `  streamcast maintain --role seal --every 250ms --flush-every 60s --log data/trades/trades
  streamcast maintain --role publish --every 10s --flush-every 60s --log data/trades/trades
  streamcast maintain --role clean --every 10s --log data/trades/trades --log data/quotes/quotes`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case role.value == "":
				return usageError{errors.New("--role is required: one of " + strings.Join(roles, ", "))}
			case len(logs) == 0:
				return usageError{errors.New("--log is required: give the directory of each log to maintain")}
			case every <= 0:
				return usageError{errors.New("--every must be a positive duration, such as 1s")}
			case flushEvery < 0:
				return usageError{errors.New("--flush-every must be a positive duration, or 0 for never")}
			case over.StagingRetention < 0 || over.PublishedSnapshotRetention < 0 || over.DeleteGrace < 0 || over.LocalDeleteGrace < 0 || over.StagingMaxBytes < 0:
				return usageError{errors.New("retention, grace and size flags must be positive (or 0 to keep the log's own setting)")}
			}
			var ready io.WriteCloser
			if cmd.Flags().Changed("ready-fd") {
				if readyFD < 3 {
					return usageError{fmt.Errorf("--ready-fd %d: give a descriptor the parent passed beyond stdin, stdout and stderr (3 or more)", readyFD)}
				}
				f := os.NewFile(uintptr(readyFD), "ready")
				if _, err := f.Stat(); err != nil {
					_ = f.Close() // now, while the number is free, not from a finalizer later
					return usageError{fmt.Errorf("--ready-fd %d is not an open file descriptor: %w", readyFD, err)}
				}
				ready = f
				defer ready.Close()
			}
			say := func(line string) {
				if ready != nil {
					_, _ = io.WriteString(ready, line+"\n")
				}
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			return logstore.RunRole(ctx, logstore.Role(role.value), logs, logstore.RoleOptions{
				Every:      every,
				FlushEvery: flushEvery,
				Flush:      flushSignals(ctx),
				Ready:      func() { say("ready") },
				Flushed:    func() { say("flushed") },
				Override:   over,
				Logger:     a.logger.With("role", role.value),
			})
		},
	}
	f := cmd.Flags()
	f.Var(role, "role", "the maintenance `ROLE` to run: "+strings.Join(roles, ", "))
	f.DurationVar(&every, "every", time.Second, "pause `DUR` between passes")
	f.DurationVar(&flushEvery, "flush-every", time.Minute, "seal and publish: flush everything once per `DUR`, at wall-clock multiples (0 never)")
	f.StringArrayVar(&logs, "log", nil, "maintain the log in `DIR` (repeat for more logs)")
	f.DurationVar(&over.StagingRetention, "staging-retention", 0, "clean: keep published local files this `DUR` (default: the log's staging_retention)")
	f.Int64Var(&over.StagingMaxBytes, "staging-max-bytes", 0, "clean: past this many `BYTES` of local files, delete the oldest published ones (default: the log's staging_max_bytes)")
	f.DurationVar(&over.PublishedSnapshotRetention, "published-snapshot-retention", 0, "clean-published: expire snapshots older than `DUR` (default: the log's published_snapshot_retention)")
	f.DurationVar(&over.DeleteGrace, "delete-grace", 0, "clean-published: wait `DUR` before deleting an unreferenced object (default: the log's delete_grace)")
	f.DurationVar(&over.LocalDeleteGrace, "local-delete-grace", 0, "clean: wait `DUR` before deleting a local file taken out of the log (default: the log's local_delete_grace)")
	f.StringVar(&over.S3.Endpoint, "s3-endpoint", "", "S3 service `URL` for an s3:// published prefix (default: the log's s3.endpoint)")
	f.StringVar(&over.S3.Region, "s3-region", "", "S3 `REGION` (default: the log's s3.region)")
	f.BoolVar(&over.S3.PathStyle, "s3-path-style", false, "address S3 buckets by path, not by host name")
	f.IntVar(&readyFD, "ready-fd", 0, "write \"ready\" (and \"flushed\" after each SIGUSR1 pass) to file descriptor `N`")
	_ = cmd.MarkFlagDirname("log")
	_ = cmd.RegisterFlagCompletionFunc("role", cobra.FixedCompletions(roles, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// flushSignals turns each SIGUSR1 into a request for a flushing pass, until
// ctx ends.
func flushSignals(ctx context.Context) <-chan struct{} {
	sig := make(chan os.Signal, 1)
	if len(flushSignal) > 0 { // Notify with no signals would relay every signal
		signal.Notify(sig, flushSignal...)
	}
	flush := make(chan struct{}, 1)
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
				select {
				case flush <- struct{}{}:
				default: // one is already pending
				}
			}
		}
	}()
	return flush
}

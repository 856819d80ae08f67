package cmd

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/logstore"
)

func newMaintainCmd(a *app) *cobra.Command {
	var (
		every, flushEvery time.Duration
		logs              []string
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
maintain process per role; run it by hand only to catch up a log whose
server is stopped.

Roles:
  seal    turn buffered rows into Parquet files under <log>/files/, a full
          target at a time; once per --flush-every (at wall-clock multiples
          of it) seal everything buffered
  clean   delete buffered rows that sealed files now hold

A failed pass is logged and retried on the next one. SIGTERM or SIGINT ends
the loop after the pass in progress; SIGUSR1 runs a flushing pass at once.
Two processes never run one role on one log at the same time: each role
holds <log>/<role>.lock while it works, and the other skips its pass.`,
		Example: `  streamcast maintain --role seal --every 1s --flush-every 60s --log data/trades/trades
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
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			return logstore.RunRole(ctx, logstore.Role(role.value), logs, logstore.RoleOptions{
				Every:      every,
				FlushEvery: flushEvery,
				Flush:      flushSignals(ctx),
				Logger:     a.logger.With("role", role.value),
			})
		},
	}
	f := cmd.Flags()
	f.Var(role, "role", "the maintenance `ROLE` to run: "+strings.Join(roles, ", "))
	f.DurationVar(&every, "every", time.Second, "pause `DUR` between passes")
	f.DurationVar(&flushEvery, "flush-every", time.Minute, "seal: seal everything buffered once per `DUR`, at wall-clock multiples (0 never)")
	f.StringArrayVar(&logs, "log", nil, "maintain the log in `DIR` (repeat for more logs)")
	_ = cmd.MarkFlagDirname("log")
	_ = cmd.RegisterFlagCompletionFunc("role", cobra.FixedCompletions(roles, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// flushSignals turns each SIGUSR1 into a request for a flushing pass, until
// ctx ends.
func flushSignals(ctx context.Context) <-chan struct{} {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
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

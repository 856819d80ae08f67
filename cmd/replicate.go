package cmd

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/internal/exepages"
	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/replica"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

func newReplicateCmd(a *app) *cobra.Command {
	// The flags are replica.Args's, which serve will render for its child too.
	args := replica.DefaultArgs()
	cmd := &cobra.Command{
		Use:   replica.Command + " --log PATH...",
		Short: "Ship each log's buffer.db WAL to a replica outside the root",
		Long: `Ship the WAL of each log's buffer.db, continuously, to a replica at
<destination>/<stream>/<log>/: a directory, or objects under an s3:// URL.
Between the replica and the published table, a machine that is lost loses
at most about --sync-interval of acknowledged rows, instead of everything
not yet published.

The destination is --destination, else the config's replicate.destination;
without either, the replica goes beside the log's published tables, at
<published prefix>/<stream>/_wal/<log>/. A replica inside the root that
holds the log (the directory above its stream's home) is refused: losing
the root would lose it too. S3 credentials come only from the standard AWS
environment variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_SESSION_TOKEN) or profile, never from flags.

One replicator ships a log at a time: each holds <log>/replicate.lock, and a
second one stands by until the lock frees, then takes over. A log is never
shipped over a replica that holds another history: when the replica is
ahead of the database, it is read back and compared, and a replica of
another log (or further along than this copy) is refused. After each round
the replicator writes <log>/replicate.json: the offsets below shipped_end
are in the replica. SIGTERM or SIGINT ships what is left, then exits. With
--ready-fd, "ready" is written to that descriptor once every log replicates
or stands by.`,
		Example: `  streamcast replicate --destination /backup/streamcast-replica --log data/trades/trades
  streamcast replicate --destination s3://my-bucket/streamcast-replica --sync-interval 250ms --log data/trades/trades --log data/quotes/quotes`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logstore.AfterInit() // a child of serve: collect as usual from here (logstore.ChildEnv)
			if args.Destination == "" && !cmd.Flags().Changed(replica.FlagDestination) {
				// Run by hand with the config serve reads: the same place.
				args.Destination = a.cfg.Replicate.Destination
				if dest, err := a.cfg.ReplicaDestination(); err == nil && args.S3 == (warehouse.S3{}) {
					args.S3 = dest.S3 // the s3: section, for an s3:// destination only
				}
			}
			if err := args.Validate(); err != nil {
				return usageError{err}
			}
			dest, err := args.Target()
			if err != nil {
				return usageError{err}
			}
			var ready io.WriteCloser
			if args.ReadyFD != 0 {
				f := os.NewFile(uintptr(args.ReadyFD), "ready")
				if _, err := f.Stat(); err != nil {
					_ = f.Close()
					return usageError{fmt.Errorf("--%s %d is not an open file descriptor: %w", replica.FlagReadyFD, args.ReadyFD, err)}
				}
				ready = f
				defer ready.Close()
			}
			caBundleForLitestream()
			var targets []replica.Target
			for _, dir := range args.Logs {
				t, err := replica.TargetFor(dir, dest)
				if err != nil {
					return err
				}
				targets = append(targets, t)
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			opts := replica.Options{SyncInterval: args.SyncInterval, SnapshotInterval: args.SnapshotInterval, SnapshotRetention: args.SnapshotRetention}
			opts.Logger = slog.New(a.logger).With("role", replica.Command)
			return replica.Run(ctx, targets, opts, func() {
				if ready != nil {
					_, _ = io.WriteString(ready, "ready\n")
				}
				to := cmp.Or(dest.Location.String(), "<published>/<stream>/_wal/<log>")
				a.logger.Info("replicating", "logs", len(targets), "to", to)
				// Most of the code and tables the start touched are not needed
				// again: give this process's mappings of them back.
				_ = exepages.Release()
			})
		},
	}
	flags := flag.NewFlagSet(replica.Command, flag.ContinueOnError)
	args.Flags(flags)
	cmd.Flags().AddGoFlagSet(flags)
	_ = cmd.MarkFlagDirname(replica.FlagLog)
	return cmd
}

// caBundleForLitestream lets the replicator trust a custom CA for S3.
// litestream's S3 client gives the AWS SDK an HTTP client of its own, and
// the SDK then refuses AWS_CA_BUNDLE ("unable to add custom RootCAs"); Go
// reads SSL_CERT_FILE for its system roots instead, so the bundle moves
// there, unless SSL_CERT_FILE already says otherwise. It runs before any
// TLS connection, while the roots are not loaded yet.
func caBundleForLitestream() {
	bundle := os.Getenv("AWS_CA_BUNDLE")
	if bundle == "" {
		return
	}
	if os.Getenv("SSL_CERT_FILE") == "" {
		_ = os.Setenv("SSL_CERT_FILE", bundle)
	}
	_ = os.Unsetenv("AWS_CA_BUNDLE")
}

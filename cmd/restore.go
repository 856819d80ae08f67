package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
)

func newRestoreCmd(a *app) *cobra.Command {
	var revive bool
	cmd := &cobra.Command{
		Use:   "restore STREAM",
		Short: "Rebuild a lost stream from its published copy and WAL replica (server stopped)",
		Long: `Restore STREAM on a machine whose root does not hold it, from the config's
published prefix (the stream's metadata and its published table) and,
when there is one, its WAL replica: at <destination>/<stream>/<log>/ for the
config's replicate.destination, else at <published>/<stream>/_wal/<log>/.
Give restore the config serve ran with, so it looks where serve shipped;
STREAMCAST_REPLICATE_DESTINATION=URL points it elsewhere.

With a replica, buffer.db comes back from it, so every row it shipped is
back at its offset; without one, only the published rows come back and the
rows never published are lost. The old writer may have acknowledged
offsets past what survives, so the log resumes past a fence: with R the
replica's next offset and P the table's end, at P+2^40 when P > R, else at
R+2^20 (P+2^40 without a replica). The skipped range is recorded as a hole:
subscribers replay across it, one asking for an offset inside it starts at
its end, and max_replay never counts it. The exactly-once marks come back
too (from the replica, or as of the table's last row), so a publisher that
resumes from its greeting's last_seq + 1 resends exactly what was lost.

Stop the old writer first: one that still runs keeps accepting rows that
the restored stream will never see, and may publish into the table.

Restore refuses when the local root holds the stream already, when the
prefix holds nothing for it, when the stream is retired (give --revive to
continue it on a new log), and when the replica belongs to another log. A
restore interrupted at any point finishes when restore runs again. Writes
one JSON line to stdout and a sentence to stderr; on a terminal each step
is shown as it starts.`,
		Example: `  streamcast restore --config streamcast.yaml trades
  streamcast restore --config streamcast.yaml --revive trades`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeStreamNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			tgt, err := a.lifecycleTarget(args[0], "restore")
			if err != nil {
				return err
			}
			lc, err := a.cfg.LogSettings(tgt.decl, "")
			if err != nil {
				return err
			}
			caBundleForLitestream() // the replica is read with litestream's S3 client
			dest, err := a.cfg.ReplicaDestination()
			if err != nil {
				return err
			}
			o := lifecycle.RestoreOptions{Log: lc, Replica: dest, Revive: revive}
			if benchOnTerminal(a.stderr) {
				o.Progress = func(step string) { fmt.Fprintf(a.stderr, "restore %s: %s…\n", tgt.stream.Name, step) }
			}
			r, err := lifecycle.Restore(cmd.Context(), tgt.stream, o)
			if err != nil {
				return err
			}
			if r.Resumed {
				fmt.Fprintf(a.stderr, "stream %s: finished the restore that was interrupted earlier\n", r.Stream)
			}
			switch r.From {
			case lifecycle.FromRevive:
				fmt.Fprintf(a.stderr, "stream %s revived: it continues on log %s from offset %d, with %d exactly-once marks\n", r.Stream, r.Log, r.Resume, r.Marks)
			case lifecycle.FromReplica:
				fmt.Fprintf(a.stderr, "stream %s restored from its replica (%s) and table: offsets up to %d are back; new rows start at %d, and [%d,%d) is a hole no row will ever fill\n",
					r.Stream, r.ReplicaAt, r.Hole.Start-1, r.Resume, r.Hole.Start, r.Hole.End)
			default:
				fmt.Fprintf(a.stderr, "stream %s restored from its table alone, for %s holds no replica of it: offsets up to %d are back; rows the old writer took from %d on were never published and are lost; new rows start at %d\n",
					r.Stream, r.ReplicaAt, r.Hole.Start-1, r.Hole.Start, r.Resume)
			}
			return a.printJSON(struct {
				Stream       string   `json:"stream"`
				Log          string   `json:"log"`
				From         string   `json:"from"`
				ReplicaAt    string   `json:"replica_at"`
				ReplicaEnd   int64    `json:"replica_end"`
				PublishedEnd int64    `json:"published_end"`
				Resume       int64    `json:"resume"`
				Hole         [2]int64 `json:"hole"`
				Marks        int      `json:"marks"`
				Resumed      bool     `json:"resumed"`
				Version      int      `json:"metadata_version"`
			}{r.Stream, r.Log, r.From, r.ReplicaAt, r.ReplicaEnd, r.PublishedEnd, r.Resume, [2]int64{r.Hole.Start, r.Hole.End}, r.Marks, r.Resumed, r.Version})
		},
	}
	cmd.Flags().BoolVar(&revive, "revive", false, "continue a retired stream on a new log, from exactly its retired end")
	return cmd
}

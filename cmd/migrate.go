package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
)

func newMigrateCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate STREAM",
		Short: "Continue a stream in a new log with the schema the config declares (server stopped)",
		Long: `Move STREAM to the schema and sort_by the config declares for it (the same
file serve reads), with the server stopped: the stream's current log is
sealed and published whole, then fenced for good, and the stream continues
in a new log, <stream>-v2, -v3, …, whose first offset is exactly the old
log's end (the seam). The exactly-once marks of publishers carry over, so
a publisher resumes across the seam with no duplicate.

Columns may be added and removed, and their nullability may change. A
column's type never changes, not even after it was removed and is added
back: the stream's metadata remembers every type it declared. A change of
type (int32 to int64 included) is refused, naming the column and both
types. A declaration equal to the current log's is a no-op that says so.

Each step is recorded in the stream's metadata before it runs, so a
migration interrupted at any point (a crash, a kill) finishes when migrate
runs again. A retired stream is refused: it gets no successor log.

After a migration serve serves the new log: a subscriber asking for an
offset below the seam is refused with 4416 evicted, earliest = the seam.

Writes one JSON line to stdout ({"stream","from","to","seam",…}) and a
sentence to stderr. migrate refuses to run while serve (or any process)
holds the log's writer lock, naming its pid.`,
		Example: `  streamcast migrate trades
  streamcast migrate --config streamcast.yaml trades`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeStreamNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			tgt, err := a.lifecycleTarget(args[0], "migrate")
			if err != nil {
				return err
			}
			lc, err := a.cfg.LogSettings(tgt.decl, "")
			if err != nil {
				return err
			}
			m, err := lifecycle.Migrate(cmd.Context(), tgt.stream, lifecycle.Declaration{Schema: tgt.schema, Log: lc}, lifecycle.Options{})
			if err != nil {
				return err
			}
			switch {
			case m.Unchanged:
				fmt.Fprintf(a.stderr, "stream %s: the config declares the schema and sort_by of its current log %s (from offset %d); nothing to migrate\n", m.Stream, m.To, m.Seam)
			default:
				if m.Resumed {
					fmt.Fprintf(a.stderr, "stream %s: finished the migration that was interrupted earlier\n", m.Stream)
				}
				fmt.Fprintf(a.stderr, "stream %s migrated: log %s ends at offset %d and log %s starts there (the seam); %d exactly-once mark(s) carried over; subscribers asking below %d are refused with 4416 evicted\n",
					m.Stream, m.From, m.Seam, m.To, m.Marks, m.Seam)
				if m.Differs {
					fmt.Fprintf(a.stderr, "stream %s: the config now declares another schema or sort_by than the interrupted migration recorded; run streamcast migrate %s again to move to it\n", m.Stream, m.Stream)
				}
			}
			return a.printJSON(struct {
				Stream    string `json:"stream"`
				From      string `json:"from"`
				To        string `json:"to"`
				Seam      int64  `json:"seam"`
				Unchanged bool   `json:"unchanged"`
				Resumed   bool   `json:"resumed"`
				Marks     int    `json:"marks"`
				Version   int    `json:"metadata_version"`
			}{m.Stream, m.From, m.To, m.Seam, m.Unchanged, m.Resumed, m.Marks, m.Version})
		},
	}
	return cmd
}

package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
)

func newRetireCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "retire STREAM",
		Short: "End a stream: publish every row and take no more (server stopped)",
		Long: `Retire STREAM, with the server stopped: every row of its current log is
sealed and published, the log is fenced for good, and the stream's metadata
records the retirement (when, and the end offset).

serve still serves a retired stream, read-only: publishers are refused with
close 4410 {"error":"retired","at":…,"end_offset":…}, subscribers replay it
as before from whichever tier holds the rows, and no maintenance child
runs over its log (nothing is left to seal or publish). restore --revive undoes
a retirement: it continues the stream on a new log from exactly its end.
migrate refuses a retired stream.

A retire interrupted at any point finishes when retire runs again; retiring
a retired stream is a no-op that says so. Writes one JSON line to stdout
({"stream","log","at","end_offset",…}) and a sentence to stderr. retire
refuses to run while serve (or any process) holds the log's writer lock,
naming its pid.`,
		Example: `  streamcast retire trades
  streamcast retire --config streamcast.yaml trades`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeStreamNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			tgt, err := a.lifecycleTarget(args[0], "retire")
			if err != nil {
				return err
			}
			r, err := lifecycle.Retire(cmd.Context(), tgt.stream, lifecycle.Options{})
			if err != nil {
				return err
			}
			switch {
			case r.Already:
				fmt.Fprintf(a.stderr, "stream %s was already retired at %s, ending at offset %d; nothing to do\n", r.Stream, micros(r.At), r.EndOffset)
			default:
				if r.Resumed {
					fmt.Fprintf(a.stderr, "stream %s: finished the retire that was interrupted earlier\n", r.Stream)
				}
				fmt.Fprintf(a.stderr, "stream %s retired at %s, ending at offset %d: every row is published; publishers are refused with 4410 and subscribers still replay it\n",
					r.Stream, micros(r.At), r.EndOffset)
			}
			return a.printJSON(struct {
				Stream    string `json:"stream"`
				Log       string `json:"log"`
				At        int64  `json:"at"`
				EndOffset int64  `json:"end_offset"`
				Already   bool   `json:"already"`
				Resumed   bool   `json:"resumed"`
				Version   int    `json:"metadata_version"`
			}{r.Stream, r.Log, r.At, r.EndOffset, r.Already, r.Resumed, r.Version})
		},
	}
	return cmd
}

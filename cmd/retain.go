package cmd

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/meta"
)

// retained is retain's one line of output.
type retained struct {
	Stream   string  `json:"stream"`
	StreamID string  `json:"stream_id"`
	MaxAge   *string `json:"max_age"` // null: none
	Floor    *int64  `json:"floor"`   // the floor published so far; null before the first
	Version  int     `json:"version"` // the metadata version now current
	Changed  bool    `json:"changed"` // false when the window was already this one
}

func newRetainCmd(a *app) *cobra.Command {
	var maxAge string
	cmd := &cobra.Command{
		Use:   "retain STREAM --max-age D|none",
		Short: "Set how long a stream keeps its rows",
		Long: `Set the retention window of a stream: rows older than --max-age are
deleted from every tier of every log of the stream (sealed and retired logs
included). A window is a whole number and a unit, s, m, h, d (24h) or w (7d),
such as 30d, 12h or 1w3d; none keeps every row from now on (rows already
deleted stay deleted).

retain records the window in the stream's metadata (a new version, written
to the published prefix first, then to the stream's home), so it works
whether serve runs or not. serve's retain child reads the metadata on each
pass (maintain.retain_every, 1h by default) and:

  1. publishes the floor, the first offset whose rows may be newer than the
     window; from then on a subscriber asking below it gets 4416 evicted
     with earliest = the floor, and offset=0 starts there;
  2. after tiers.retention_grace (1h by default), deletes whole files and
     buffered rows below the floor, so readers that started before the
     floor moved can finish. A file that straddles the floor stays until
     the floor passes it.

Prints one JSON line: the stream, its stream_id, max_age, the floor
published so far, the metadata version and whether it changed.`,
		Example: `  streamcast retain trades --max-age 30d
  streamcast retain trades --max-age 1w3d
  streamcast retain trades --max-age none`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeStreamNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			stream := args[0]
			if !cmd.Flags().Changed("max-age") {
				return usageError{errors.New("--max-age is required: a window such as 30d, or none to keep every row")}
			}
			if maxAge != meta.MaxAgeNone {
				if _, err := meta.ParseMaxAge(maxAge); err != nil {
					return usageError{fmt.Errorf("--max-age: %w", err)}
				}
			}
			if err := meta.CheckName(stream); err != nil {
				return usageError{err}
			}
			cfg := a.cfg
			if err := refuseProtected(cfg, stream, "retain"); err != nil {
				return err
			}
			lay, err := meta.NewLayout(cfg.Root, cfg.Published)
			if err != nil {
				return fmt.Errorf("config: %w", err)
			}
			st, err := meta.NewStore(cmd.Context(), lay, stream, cfg.S3)
			if err != nil {
				return err
			}
			m, changed, err := meta.SetMaxAge(cmd.Context(), st, maxAge)
			if err != nil {
				return err
			}
			if changed {
				a.logger.Info("recorded the retention window; serve's retain child applies it at its next pass",
					"stream", stream, "max_age", retainText(m.Retention.MaxAge), "version", m.Version)
			} else {
				a.logger.Info("the stream already has this retention window; nothing written", "stream", stream, "max_age", retainText(m.Retention.MaxAge))
			}
			b, err := json.Marshal(retained{Stream: stream, StreamID: m.StreamID, MaxAge: m.Retention.MaxAge,
				Floor: m.Retention.Floor, Version: m.Version, Changed: changed})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "%s\n", b)
			return err
		},
	}
	cmd.Flags().StringVar(&maxAge, "max-age", "", "keep rows this `D` (such as 30d, 12h, 1w3d), or none to keep every row")
	_ = cmd.RegisterFlagCompletionFunc("max-age", cobra.FixedCompletions([]string{"none", "1h", "1d", "7d", "30d"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func retainText(p *string) string {
	if p == nil {
		return meta.MaxAgeNone
	}
	return *p
}

package cmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/broker/control"
	"github.com/streamcast/streamcast/pkg/meta/lifecycle"
)

func newControlCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "control",
		Short: "Manage the control API's registry",
		Long: `The control API (/control/v1, turned on by the config's control: section)
declares, starts, stops, migrates and retires streams while serve runs. The
streams it manages are kept in a registry, a SQLite file at
control.registry (default <root>/_control/registry.db). serve never creates
the registry: make it once with "streamcast control init".`,
	}
	cmd.AddCommand(newControlInitCmd(a), newMigrateChildCmd(a))
	return cmd
}

// newMigrateChildCmd is the worker process serve runs online migrations'
// file work in (pkg/broker/control, migrator.go), at the lowest CPU
// priority. It is hidden: serve starts it and writes its jobs to it.
func newMigrateChildCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   control.MigrateChildCommand,
		Short: "Run the migrations serve hands over (started by serve)",
		Long: `Read migration jobs (one JSON line each) from stdin, run each, and write what
it did, or its error, as one JSON line to stdout; exit when stdin ends. serve
starts this command itself for the control API's online migrations; there
is no reason to run it by hand.`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return lifecycle.ServeMigrateJobs(cmd.Context(), a.stdin, a.stdout)
		},
	}
}

func newControlInitCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Create the control registry, once",
		Long: `Create the control registry the config's control: section names
(control.registry, default <root>/_control/registry.db), with a new broker
id. An existing registry is refused and left as it is. Writes one JSON line
to stdout ({"registry","broker_id"}) and a sentence to stderr.`,
		Example: `  streamcast control init --config streamcast.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.cfg.Control == nil {
				return errors.New("the config has no control: section; add one (with at least one storage profile under control.profiles) to turn the control API on, then run control init again")
			}
			if err := a.cfg.Validate(); err != nil {
				return err
			}
			path := a.cfg.RegistryPath()
			id, err := control.Init(cmd.Context(), path)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "created the control registry %s (broker id %s); serve with this config serves /control/v1\n", path, id)
			return a.printJSON(struct {
				Registry string `json:"registry"`
				BrokerID string `json:"broker_id"`
			}{path, id})
		},
	}
}

package cmd

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/meta/config"
)

// setup runs before every command (the root's PersistentPreRunE): it loads
// the configuration, the one read of the config file for this run, and
// builds the configured logger. Every command needs the log: section, so a
// mistake there, or a file streamcast cannot decode, stops any command;
// the other checks (Validate) are for serve and config.
func (a *app) setup(cmd *cobra.Command) error {
	a.cmd = cmd
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	if err := cfg.ValidateLog(); err != nil {
		return err
	}
	a.cfg = cfg
	a.configUsed = cfg.File()
	a.logger = newLogger(a.stderr, cfg.Log)
	if a.configUsed != "" {
		a.logger.Debug("read configuration", "file", a.configUsed)
	}
	return nil
}

// loadConfig resolves the configuration for the running command: --config
// and its flags (config.Resolve). It does not Validate.
func (a *app) loadConfig() (config.Config, error) {
	src := config.Sources{File: a.configFile}
	if a.cmd != nil {
		src.Flags = a.cmd.Flags()
	}
	return config.Resolve(src)
}

// choice is a string flag limited to a fixed set of values, checked as the
// flag is parsed so a bad value is a usage error.
type choice struct {
	typ     string
	value   string
	allowed []string
}

func newChoice(typ, def string, allowed []string) *choice {
	return &choice{typ: typ, value: def, allowed: allowed}
}

func (c *choice) String() string { return c.value }
func (c *choice) Type() string   { return c.typ }
func (c *choice) Set(s string) error {
	s = strings.ToLower(s)
	if !slices.Contains(c.allowed, s) {
		return fmt.Errorf("want one of %s", strings.Join(c.allowed, ", "))
	}
	c.value = s
	return nil
}

func newConfigCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the effective configuration",
		Long: `Print the whole configuration ` + "`streamcast serve`" + ` would run with: the
config file laid over the built-in defaults, then ` + "`STREAMCAST_*`" + ` environment
variables and flags (each overrides the one before), every section and
every stream with its schema, as YAML, or as one JSON object with --json.
What it prints is itself a config file that reproduces it.

It checks the configuration exactly as serve does and exits 1 on what serve
would refuse (an unknown key, a key that looks like a credential, a limit
below 1, a schema that does not compile, …), naming the key and where its
value came from: the file and line, the environment variable, the flag, or
the default. A file that declares no streams gets the embedded demo stream,
as serve does. A value marked secret is printed as "[redacted]".

Every key but streams may also be set by an environment variable: the key
in upper case with "." and "-" turned into "_", prefixed by
` + "`STREAMCAST_`" + `: log.level is ` + "`STREAMCAST_LOG_LEVEL`" + `, limits.max_backlog is
` + "`STREAMCAST_LIMITS_MAX_BACKLOG`" + `. A list takes comma-separated items. An
empty variable counts as unset.`,
		Example: `  streamcast config --config streamcast.yaml
  STREAMCAST_LOG_LEVEL=debug streamcast config --json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := a.cfg
			if err := a.checkServeConfig(&cfg); err != nil { // serve's own check, so that config refuses what serve refuses
				return err
			}
			if asJSON {
				b, err := cfg.JSON()
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "%s\n", b)
				return err
			}
			b, err := cfg.YAML()
			if err != nil {
				return err
			}
			if a.configUsed != "" {
				fmt.Fprintf(a.stdout, "# config file: %s\n", a.configUsed)
			}
			_, err = a.stdout.Write(b)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of YAML")
	return cmd
}

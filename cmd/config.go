package cmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/streamcast/streamcast/pkg/meta/config"
)

const (
	envPrefix         = "STREAMCAST"        // STREAMCAST_LOG_LEVEL sets log.level
	configEnv         = "STREAMCAST_CONFIG" // the config file, when --config is not given
	defaultConfigFile = "streamcast.yaml"   // read from the working directory when present
	configKeyAnnot    = "streamcast_config_key"
)

var envKey = strings.NewReplacer(".", "_", "-", "_")

func newViper() *viper.Viper {
	v := viper.New()
	v.SetEnvPrefix(envPrefix)
	v.SetEnvKeyReplacer(envKey)
	v.AutomaticEnv()
	return v
}

// envName is the environment variable viper consults for key.
func envName(key string) string {
	return envPrefix + "_" + strings.ToUpper(envKey.Replace(key))
}

// configFlag marks flag name of fs as the command-line form of config key:
// when its command runs, the flag, if given, overrides the environment and
// the config file for that key.
func configFlag(fs *pflag.FlagSet, name, key string) {
	if err := fs.SetAnnotation(name, configKeyAnnot, []string{key}); err != nil {
		panic(fmt.Sprintf("configFlag: %v", err)) // a programming error in the command tree, not input
	}
}

// configSwitch marks the boolean flag name of fs as setting config key to
// value when it is given (--no-maintain sets maintain to false).
func configSwitch(fs *pflag.FlagSet, name, key, value string) {
	if err := fs.SetAnnotation(name, configKeyAnnot, []string{key, value}); err != nil {
		panic(fmt.Sprintf("configSwitch: %v", err)) // a programming error in the command tree, not input
	}
}

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
	a.logger = newLogger(a.stderr, cfg.Log)
	if a.configUsed != "" {
		a.logger.Debug("read configuration", "file", a.configUsed)
	}
	return nil
}

// loadConfig reads the config file (once per call), lays the STREAMCAST_*
// environment variables and the running command's flags over it, and decodes
// the result into one config.Config over the embedded default. It refuses
// what cannot be decoded, naming the key and where its value came from, but
// does not Validate.
func (a *app) loadConfig() (config.Config, error) {
	path, data, err := a.readConfig()
	if err != nil {
		return config.Config{}, err
	}
	overrides, err := a.overrides()
	if err != nil {
		return config.Config{}, err
	}
	return config.Load(config.Embedded(), path, data, overrides...)
}

// readConfig reads --config, else $STREAMCAST_CONFIG, else ./streamcast.yaml
// when it exists; a file named explicitly must exist. It returns "" and no
// data when there is no file.
func (a *app) readConfig() (string, []byte, error) {
	path := a.configFile
	if path == "" {
		path = os.Getenv(configEnv)
	}
	if path == "" {
		if _, err := os.Stat(defaultConfigFile); errors.Is(err, fs.ErrNotExist) {
			return "", nil, nil
		}
		path = defaultConfigFile
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("read config: %w", err)
	}
	a.configUsed = path
	return path, data, nil
}

// overrides collects, through viper, the value of each config.OverrideKeys
// key given by a flag of the running command (marked with configFlag) or
// else by a non-empty STREAMCAST_* environment variable, and the keys set
// by a configSwitch flag. Keys nothing overrides keep the file's value.
func (a *app) overrides() ([]config.Override, error) {
	keys := config.OverrideKeys()
	v := newViper()
	flags := map[string]*pflag.Flag{}  // key → the running command's flag for it
	var env, flagged []config.Override // the environment's first: config.Load lets later ones win
	if a.cmd != nil {
		a.cmd.Flags().VisitAll(func(f *pflag.Flag) {
			switch ann := f.Annotations[configKeyAnnot]; len(ann) {
			case 1: // configFlag: [key]
				flags[ann[0]] = f
				_ = v.BindPFlag(ann[0], f) // fails only for a nil flag
			case 2: // configSwitch: [key, value]
				if f.Changed && f.Value.String() == "true" {
					flagged = append(flagged, config.Override{Key: ann[0], Value: ann[1], From: "flag --" + f.Name})
				}
			}
		})
	}
	for key, f := range flags {
		if !slices.Contains(keys, key) {
			return nil, fmt.Errorf("flag --%s is marked as the form of config key %s, which config.Config does not have", f.Name, key) // a mistake in the command tree
		}
	}
	for _, key := range keys {
		if !v.IsSet(key) { // neither its flag given nor its variable set (AutomaticEnv: STREAMCAST_ + the key)
			continue
		}
		ov := config.Override{Key: key, Value: overrideValue(v.Get(key)), From: "environment " + envName(key)}
		if f := flags[key]; f != nil && f.Changed {
			ov.From = "flag --" + f.Name
			flagged = append(flagged, ov)
			continue
		}
		env = append(env, ov)
	}
	return append(env, flagged...), nil
}

// overrideValue is a value viper found, as the text config.Override takes.
func overrideValue(v any) string {
	switch v := v.(type) {
	case []string:
		return strings.Join(v, ",")
	case string:
		return v
	}
	return fmt.Sprint(v)
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

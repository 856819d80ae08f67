package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/log"
	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

const (
	envPrefix         = "STREAMCAST"        // STREAMCAST_LOG_LEVEL sets log.level
	configEnv         = "STREAMCAST_CONFIG" // the config file, when --config is not given
	defaultConfigFile = "streamcast.yaml"   // read from the working directory when present
	configKeyAnnot    = "streamcast_config_key"
)

var (
	logLevels  = []string{"debug", "info", "warn", "error"}
	logFormats = []string{"text", "json"}
	envKey     = strings.NewReplacer(".", "_", "-", "_")
)

// logConfig is the logging configuration every command shares (config
// keys log.level and log.format).
type logConfig struct {
	Level  string `yaml:"level"`  // debug, info, warn or error
	Format string `yaml:"format"` // text or json
}

// defaultLogConfig is text at info. Text is the default everywhere, not only
// on a terminal: colours are dropped by the renderer when stderr is not a
// terminal, and production asks for json explicitly (--log-format json).
// A default that depended on the terminal would also make the generated man
// pages depend on where they were generated.
func defaultLogConfig() logConfig { return logConfig{Level: "info", Format: "text"} }

// Validate refuses a level or format streamcast does not know.
func (c *logConfig) Validate() error {
	c.Level = strings.ToLower(c.Level)
	c.Format = strings.ToLower(c.Format)
	if !slices.Contains(logLevels, c.Level) {
		return &badValue{Key: "level", Value: c.Level, Want: logLevels}
	}
	if !slices.Contains(logFormats, c.Format) {
		return &badValue{Key: "format", Value: c.Format, Want: logFormats}
	}
	return nil
}

func newLogger(w io.Writer, c logConfig) *log.Logger {
	level, err := log.ParseLevel(c.Level)
	if err != nil {
		level = log.InfoLevel
	}
	opts := log.Options{Level: level, ReportTimestamp: true}
	if c.Format == "json" {
		opts.Formatter = log.JSONFormatter
		opts.TimeFunction = log.NowUTC
		opts.TimeFormat = time.RFC3339Nano
	}
	return log.NewWithOptions(w, opts)
}

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

// setup runs before every command (the root's PersistentPreRunE): it binds
// the running command's marked flags, reads the config file and builds the
// configured logger.
func (a *app) setup(cmd *cobra.Command) error {
	var bindErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		keys := f.Annotations[configKeyAnnot]
		if len(keys) == 0 {
			return
		}
		if err := a.v.BindPFlag(keys[0], f); err != nil && bindErr == nil {
			bindErr = err
		}
		a.bound[keys[0]] = f
	})
	if bindErr != nil {
		return bindErr
	}
	if err := a.readConfig(); err != nil {
		return err
	}
	lc := defaultLogConfig()
	if err := a.decode("log", &lc); err != nil {
		return err
	}
	a.logger = newLogger(a.stderr, lc)
	if a.configUsed != "" {
		a.logger.Debug("read configuration", "file", a.configUsed)
	}
	return nil
}

// readConfig reads --config, else $STREAMCAST_CONFIG, else ./streamcast.yaml
// when it exists. A file named explicitly must exist.
func (a *app) readConfig() error {
	path := a.configFile
	if path == "" {
		path = os.Getenv(configEnv)
	}
	if path == "" {
		if _, err := os.Stat(defaultConfigFile); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		path = defaultConfigFile
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	a.v.SetConfigType("yaml")
	if err := a.v.ReadConfig(bytes.NewReader(data)); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	a.configUsed = path
	return nil
}

// decode fills dst, a pointer to a struct with yaml tags holding its
// defaults, from the keys under prefix ("" for the whole configuration),
// each taken from its flag, environment variable, the config file or dst's
// default, in that order. If dst has a Validate method it runs last, and a
// *badValue it returns is reported with its full key and where the value
// came from.
func (a *app) decode(prefix string, dst any) error {
	defaults, err := toMap(dst)
	if err != nil {
		return fmt.Errorf("config %s: %w", prefix, err)
	}
	// Every field becomes a known key; viper consults the environment only for known keys.
	for key, val := range flatten(defaults) {
		a.v.SetDefault(joinKey(prefix, key), val)
	}
	tree := map[string]any{}
	keys := a.v.AllKeys()
	sort.Strings(keys) // a parent before its children, so a child's map is never replaced by the parent's value
	for _, key := range keys {
		rel, ok := underKey(prefix, key)
		if !ok {
			continue
		}
		setPath(tree, strings.Split(rel, "."), a.v.Get(key))
	}
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:           dst,
		TagName:          "yaml",
		WeaklyTypedInput: true, // environment variables are strings
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
		),
	})
	if err != nil {
		return err
	}
	if err := dec.Decode(tree); err != nil {
		name := prefix
		if name == "" {
			name = "configuration"
		}
		return fmt.Errorf("config %s: %w", name, err)
	}
	if val, ok := dst.(interface{ Validate() error }); ok {
		if err := val.Validate(); err != nil {
			var bv *badValue
			if errors.As(err, &bv) {
				bv.Key = joinKey(prefix, bv.Key)
				bv.From = a.origin(bv.Key)
			}
			return err
		}
	}
	return nil
}

// origin says where the effective value of key comes from, as a user would
// change it: the flag, the environment variable, the config file, or the default.
func (a *app) origin(key string) string {
	if f, ok := a.bound[key]; ok && f.Changed {
		return "--" + f.Name
	}
	if v, ok := os.LookupEnv(envName(key)); ok && v != "" { // viper ignores empty variables too
		return envName(key)
	}
	if a.configUsed != "" && a.v.InConfig(key) {
		return "config file " + a.configUsed
	}
	return "default"
}

// badValue is a Validate error for a setting outside its allowed values.
// Key is relative to the struct Validate belongs to; decode makes it the
// full key and fills From.
type badValue struct {
	Key   string
	Value string
	Want  []string
	From  string // "--log-level", "STREAMCAST_LOG_LEVEL", "config file x.yaml", "default"
}

func (e *badValue) Error() string {
	from := ""
	if e.From != "" {
		from = " (from " + e.From + ")"
	}
	return fmt.Sprintf("%s %q%s is not one of %s", e.Key, e.Value, from, strings.Join(e.Want, ", "))
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

// toMap turns a struct into the nested map its yaml tags describe.
func toMap(v any) (map[string]any, error) {
	b, err := yaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// flatten turns a nested map into dotted keys and leaf values. Nil values
// and empty maps have no leaves and are left out.
func flatten(m map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := joinKey(prefix, strings.ToLower(k))
			switch v := v.(type) {
			case nil:
			case map[string]any:
				walk(key, v)
			default:
				out[key] = v
			}
		}
	}
	walk("", m)
	return out
}

func setPath(tree map[string]any, path []string, val any) {
	for _, p := range path[:len(path)-1] {
		next, ok := tree[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			tree[p] = next
		}
		tree = next
	}
	last := path[len(path)-1]
	if _, isMap := tree[last].(map[string]any); isMap {
		if _, valIsMap := val.(map[string]any); !valIsMap {
			return // children were set already; they are more specific
		}
	}
	tree[last] = val
}

func joinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func underKey(prefix, key string) (string, bool) {
	if prefix == "" {
		return key, true
	}
	return strings.CutPrefix(key, strings.ToLower(prefix)+".")
}

func newConfigCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the effective configuration",
		Long: `Print the configuration streamcast sees after merging the config file,
` + "`STREAMCAST_*`" + ` environment variables and flags (each overrides the one
before), as YAML, or as one JSON object with --json.

Keys are lower case; the environment variable of a key is the key in upper
case with "." and "-" turned into "_", prefixed by ` + "`STREAMCAST_`" + `: log.level is
` + "`STREAMCAST_LOG_LEVEL`" + `. Only keys that have a default or appear in the
config file are shown; an environment variable for a key streamcast does not
know is ignored.`,
		Example: `  streamcast config --config streamcast.yaml
  STREAMCAST_LOG_LEVEL=debug streamcast config --json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			settings := a.v.AllSettings()
			if asJSON {
				b, err := json.Marshal(settings)
				if err != nil {
					return fmt.Errorf("encode configuration: %w", err)
				}
				_, err = fmt.Fprintf(a.stdout, "%s\n", b)
				return err
			}
			if a.configUsed != "" {
				fmt.Fprintf(a.stdout, "# config file: %s\n", a.configUsed)
			}
			enc := yaml.NewEncoder(a.stdout)
			enc.SetIndent(2)
			if err := enc.Encode(settings); err != nil {
				return fmt.Errorf("encode configuration: %w", err)
			}
			return enc.Close()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of YAML")
	return cmd
}

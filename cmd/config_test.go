package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/meta/config"
)

// configEnv names the config file when --config does not; tests clear it,
// so that a variable set where they run is not read.
const configEnv = config.FileVar

// runSetup parses args for a serve-like command (--listen marked as listen,
// --max-backlog as limits.max_backlog, --no-maintain as maintain: false),
// with config as ./streamcast.yaml when not empty, runs the root's setup
// on it, and returns the app.
func runSetup(t *testing.T, yaml string, args ...string) (*app, error) {
	t.Helper()
	t.Chdir(t.TempDir())
	t.Setenv(configEnv, "")
	a := &app{stderr: &strings.Builder{}}
	c := &cobra.Command{Use: "serve"}
	def := config.Default()
	c.Flags().String("listen", def.Listen, "")
	c.Flags().Int("max-backlog", def.Limits.MaxBacklog, "")
	c.Flags().Bool("no-maintain", false, "")
	config.MarkFlag(c.Flags(), "listen", "listen")
	config.MarkFlag(c.Flags(), "max-backlog", "limits.max_backlog")
	config.MarkSwitch(c.Flags(), "no-maintain", "maintain", "false")
	if yaml != "" {
		if err := os.WriteFile("streamcast.yaml", []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return a, a.setup(c)
}

func TestConfigMergesDefaultsFileEnvironmentAndFlags(t *testing.T) {
	t.Setenv("STREAMCAST_LIMITS_MAX_INBOUND", "7")
	t.Setenv("STREAMCAST_S3_REGION", "eu-west-3")
	t.Setenv("STREAMCAST_ROOT", "/env/root")
	t.Setenv("STREAMCAST_TIERS_TARGET_SEAL_BYTES", "8MiB")
	t.Setenv("STREAMCAST_LIMITS_MAX_IN_FLIGHT", "") // empty counts as unset
	a, err := runSetup(t, `listen: file:1
root: /file/root
limits: {max_in_flight: 3}
streams:
  - name: trades
    schema: {type: object, properties: {Price: {type: number}}, required: [Price]}
`, "--listen", "flag:2", "--no-maintain")
	if err != nil {
		t.Fatal(err)
	}
	got := a.cfg
	switch {
	case got.Listen != "flag:2":
		t.Errorf("listen %q: the flag must beat the file", got.Listen)
	case got.Root != "/env/root":
		t.Errorf("root %q: the environment must beat the file", got.Root)
	case got.Limits.MaxInbound != 7:
		t.Errorf("max_inbound %d: the environment must beat the default", got.Limits.MaxInbound)
	case got.Limits.MaxInFlight != 3:
		t.Errorf("max_in_flight %d: the file must beat the default and an empty variable", got.Limits.MaxInFlight)
	case got.Limits.MaxBacklog != config.DefaultMaxBacklog:
		t.Errorf("max_backlog %d: an unset flag must leave the default", got.Limits.MaxBacklog)
	case got.S3.Region != "eu-west-3":
		t.Errorf("s3.region %q: want the environment's", got.S3.Region)
	case got.Maintain.Enabled:
		t.Errorf("maintain %+v: want it off by --no-maintain", got.Maintain)
	case got.Tiers.TargetSealBytes != 8<<20:
		t.Errorf("tiers.target_seal_bytes %d: want 8MiB from the environment, read as the file reads it", got.Tiers.TargetSealBytes)
	case len(got.Streams) != 1 || !strings.Contains(string(got.Streams[0].Schema), `"Price"`):
		t.Errorf("streams %+v: want the file's one stream, its property's case kept", got.Streams)
	}
	for key, want := range map[string]string{
		"listen":               "flag --listen",
		"root":                 "environment STREAMCAST_ROOT",
		"limits.max_in_flight": "config file streamcast.yaml, line 3",
		"limits.max_backlog":   "default",
		"maintain":             "flag --no-maintain",
		"streams[0].name":      "config file streamcast.yaml, line 5",
	} {
		if from := got.From(key); from != want {
			t.Errorf("%s comes from %q, want %q", key, from, want)
		}
	}
}

func TestConfigWithoutAnySourceIsTheEmbeddedDefault(t *testing.T) {
	a, err := runSetup(t, "")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := config.Embedded().YAML()
	if got, _ := a.cfg.YAML(); string(got) != string(want) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestConfigErrorsSayWhereTheValueCameFrom(t *testing.T) {
	tests := []struct {
		name, config, env string
		args              []string
		from              string
	}{
		{name: "flag", args: []string{"--max-backlog", "0"}, from: "flag --max-backlog"},
		{name: "environment", env: "0", from: "environment STREAMCAST_LIMITS_MAX_BACKLOG"},
		{name: "file", config: "# limits\nlimits:\n  max_backlog: 0\n", from: "config file streamcast.yaml, line 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("STREAMCAST_LIMITS_MAX_BACKLOG", tt.env)
			}
			a, err := runSetup(t, tt.config, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			err = a.cfg.Validate()
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *config.Error", err)
			}
			if ce.Key != "limits.max_backlog" || ce.From != tt.from {
				t.Errorf("got key %q from %q, want limits.max_backlog from %q (%v)", ce.Key, ce.From, tt.from, err)
			}
			if want := tt.from + ": limits.max_backlog is 0; it must be at least 1"; err.Error() != want {
				t.Errorf("message %q, want %q", err, want)
			}
		})
	}
}

func TestConfigRefusesAValueOfTheWrongTypeNamingItsSource(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		_, err := runSetup(t, "limits:\n  max_backlog: lots\n")
		if err == nil || !strings.HasPrefix(err.Error(), "config file streamcast.yaml, line 2: limits.max_backlog: ") {
			t.Fatalf("got %v, want an error naming the file, line 2 and limits.max_backlog", err)
		}
	})
	t.Run("environment", func(t *testing.T) {
		t.Setenv("STREAMCAST_MAINTAIN_SEAL_EVERY", "often")
		_, err := runSetup(t, "")
		if err == nil || !strings.HasPrefix(err.Error(), "environment STREAMCAST_MAINTAIN_SEAL_EVERY: maintain.seal_every: ") {
			t.Fatalf("got %v, want an error naming STREAMCAST_MAINTAIN_SEAL_EVERY", err)
		}
	})
}

func TestReadConfigPrefersFlagThenEnvironmentThenWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, name := range []string{"flag.yaml", "env.yaml", "streamcast.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("log:\n  level: debug\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct{ flag, env, want string }{
		{"flag.yaml", "env.yaml", "flag.yaml"},
		{"", "env.yaml", "env.yaml"},
		{"", "", "streamcast.yaml"},
	}
	for _, tt := range tests {
		t.Setenv(configEnv, tt.env)
		a := &app{configFile: tt.flag, stderr: &strings.Builder{}}
		if err := a.setup(&cobra.Command{Use: "version"}); err != nil {
			t.Fatal(err)
		}
		if a.configUsed != tt.want || a.cfg.Log.Level != "debug" {
			t.Errorf("--config %q, %s=%q: read %q (log.level %s), want %q", tt.flag, configEnv, tt.env, a.configUsed, a.cfg.Log.Level, tt.want)
		}
	}
}

func TestAFlagThatSetsASectionBeatsTheEnvironmentInsideIt(t *testing.T) {
	t.Setenv("STREAMCAST_MAINTAIN_FLUSH_EVERY", "5s")
	a, err := runSetup(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if m := a.cfg.Maintain; m.FlushEvery != 5*time.Second || !m.Enabled {
		t.Fatalf("maintain %+v: want flush_every 5s from the environment", m)
	}
	a, err = runSetup(t, "", "--no-maintain")
	if err != nil {
		t.Fatal(err)
	}
	if a.cfg.Maintain.Enabled || a.cfg.From("maintain.flush_every") != "flag --no-maintain" {
		t.Fatalf("maintain %+v from %q: want it off, by --no-maintain", a.cfg.Maintain, a.cfg.From("maintain.flush_every"))
	}
}

// TestEveryKeyButStreamsHasItsEnvironmentVariable sets STREAMCAST_<KEY> for
// every setting `streamcast config` prints but streams (each to its default,
// as text) and checks that each was taken from there: a key added to any
// section gains its variable with no list to update.
func TestEveryKeyButStreamsHasItsEnvironmentVariable(t *testing.T) {
	b, err := config.Embedded().JSON()
	if err != nil {
		t.Fatal(err)
	}
	var defaults map[string]any
	if err := json.Unmarshal(b, &defaults); err != nil {
		t.Fatal(err)
	}
	delete(defaults, "streams")
	values := map[string]string{} // key → its default as a variable's text
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := strings.TrimPrefix(prefix+"."+k, ".")
			switch v := v.(type) {
			case map[string]any:
				walk(key, v)
			case []any:
				items := make([]string, len(v))
				for i, item := range v {
					items[i] = fmt.Sprint(item)
				}
				values[key] = strings.Join(items, ",")
			default:
				values[key] = fmt.Sprint(v)
			}
		}
	}
	walk("", defaults)
	if len(values) < 20 {
		t.Fatalf("only %d keys found in %s", len(values), b)
	}
	for key, text := range values {
		if text == "" {
			text = "x" // an empty variable counts as unset
		}
		t.Setenv(config.EnvVar(key), text)
	}
	a, err := runSetup(t, "")
	if err != nil {
		t.Fatal(err)
	}
	for key := range values {
		if from, want := a.cfg.From(key), "environment "+config.EnvVar(key); from != want {
			t.Errorf("%s comes from %q, want %q", key, from, want)
		}
	}
}

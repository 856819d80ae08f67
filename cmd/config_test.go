package cmd

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

type testServeConfig struct {
	Listen     string        `yaml:"listen"`
	MaxBacklog int           `yaml:"max_backlog"`
	FlushEvery time.Duration `yaml:"flush_every"`
	Durable    bool          `yaml:"durable"`
	Tags       []string      `yaml:"tags"`
	Store      struct {
		Root string `yaml:"root"`
	} `yaml:"store"`
}

func (c *testServeConfig) Validate() error {
	if strings.HasPrefix(c.Listen, "bad") {
		return &badValue{Key: "listen", Value: c.Listen, Want: []string{"host:port"}}
	}
	return nil
}

func defaultTestServeConfig() testServeConfig {
	c := testServeConfig{Listen: "127.0.0.1:8765", MaxBacklog: 1024, FlushEvery: time.Minute, Durable: true, Tags: []string{"a"}}
	c.Store.Root = "./streamcast-data"
	return c
}

// runSetup parses args for a command with a --listen flag marked as
// serve.listen, runs the root's setup on it, and returns the app.
func runSetup(t *testing.T, config string, args ...string) *app {
	t.Helper()
	t.Chdir(t.TempDir())
	t.Setenv(configEnv, "")
	a := &app{v: newViper(), stderr: &strings.Builder{}, bound: map[string]*pflag.Flag{}}
	c := &cobra.Command{Use: "serve"}
	c.Flags().String("listen", defaultTestServeConfig().Listen, "")
	configFlag(c.Flags(), "listen", "serve.listen")
	if config != "" {
		if err := os.WriteFile("streamcast.yaml", []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	if err := a.setup(c); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestDecodeMergesDefaultsFileEnvironmentAndFlags(t *testing.T) {
	t.Setenv("STREAMCAST_SERVE_MAX_BACKLOG", "7")
	t.Setenv("STREAMCAST_SERVE_FLUSH_EVERY", "5s")
	t.Setenv("STREAMCAST_SERVE_STORE_ROOT", "/env/root")
	a := runSetup(t, "serve:\n  listen: file:1\n  durable: false\n  store:\n    root: /file/root\n", "--listen", "flag:2")

	got := defaultTestServeConfig()
	if err := a.decode("serve", &got); err != nil {
		t.Fatal(err)
	}
	want := defaultTestServeConfig()
	want.Listen = "flag:2"            // flag beats the file
	want.MaxBacklog = 7               // environment beats the default
	want.FlushEvery = 5 * time.Second // durations parse from text
	want.Durable = false              // the file beats the default
	want.Store.Root = "/env/root"     // environment beats the file, nested
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestDecodeWithoutAnySourceKeepsDefaults(t *testing.T) {
	a := runSetup(t, "")
	got := defaultTestServeConfig()
	if err := a.decode("serve", &got); err != nil {
		t.Fatal(err)
	}
	if want := defaultTestServeConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestDecodeNamesWhereABadValueCameFrom(t *testing.T) {
	tests := []struct {
		name, config, env string
		args              []string
		from              string
	}{
		{name: "flag", args: []string{"--listen", "bad1"}, from: "--listen"},
		{name: "environment", env: "bad2", from: "STREAMCAST_SERVE_LISTEN"},
		{name: "file", config: "serve:\n  listen: bad3\n", from: "config file streamcast.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("STREAMCAST_SERVE_LISTEN", tt.env)
			}
			a := runSetup(t, tt.config, tt.args...)
			cfg := defaultTestServeConfig()
			err := a.decode("serve", &cfg)
			var bv *badValue
			if !errors.As(err, &bv) {
				t.Fatalf("got %v, want a *badValue", err)
			}
			if bv.Key != "serve.listen" || bv.From != tt.from {
				t.Errorf("got key %q from %q, want serve.listen from %q (%v)", bv.Key, bv.From, tt.from, err)
			}
		})
	}
}

func TestDecodeRefusesAValueOfTheWrongType(t *testing.T) {
	a := runSetup(t, "serve:\n  max_backlog: lots\n")
	cfg := defaultTestServeConfig()
	err := a.decode("serve", &cfg)
	if err == nil || !strings.Contains(err.Error(), "max_backlog") {
		t.Fatalf("got %v, want an error naming max_backlog", err)
	}
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
		a := &app{v: newViper(), configFile: tt.flag}
		if err := a.readConfig(); err != nil {
			t.Fatal(err)
		}
		if a.configUsed != tt.want {
			t.Errorf("--config %q, %s=%q: read %q, want %q", tt.flag, configEnv, tt.env, a.configUsed, tt.want)
		}
	}
}

package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// resolve runs Resolve as a serve-like command would, in a fresh working
// directory: yaml, when not empty, is ./streamcast.yaml; env holds the
// variables set (FileVar is cleared unless env sets it); args are parsed
// by a flag set with --listen, --max-backlog, --seal-every and --origins
// marked as their keys, and the switch --no-maintain.
func resolve(t *testing.T, yaml string, env map[string]string, args ...string) (Config, error) {
	t.Helper()
	t.Chdir(t.TempDir())
	t.Setenv(FileVar, "")
	for k, v := range env {
		t.Setenv(k, v)
	}
	if yaml != "" {
		if err := os.WriteFile(DefaultFile, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	def := Default()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.String("listen", def.Listen, "")
	fs.Int("max-backlog", def.Limits.MaxBacklog, "")
	fs.String("seal-every", def.Maintain.SealEvery.String(), "")
	fs.StringSlice("origins", nil, "")
	fs.Bool("no-maintain", false, "")
	MarkFlag(fs, "listen", "listen")
	MarkFlag(fs, "max-backlog", "limits.max_backlog")
	MarkFlag(fs, "seal-every", "maintain.seal_every")
	MarkFlag(fs, "origins", "allowed_origins")
	MarkSwitch(fs, "no-maintain", "maintain", "false")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return Resolve(Sources{Flags: fs})
}

func TestResolveLaysDefaultFileEnvironmentAndFlagsInThatOrder(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		env      map[string]string
		args     []string
		listen   string // want
		from     string // want listen's origin
		fileUsed string
	}{
		{name: "default alone", listen: DefaultListen, from: "default"},
		{name: "file beats default", yaml: "listen: file:1\n", listen: "file:1", from: "config file streamcast.yaml, line 1", fileUsed: DefaultFile},
		{name: "environment beats default", env: map[string]string{"STREAMCAST_LISTEN": "env:2"}, listen: "env:2", from: "environment STREAMCAST_LISTEN"},
		{name: "environment beats file", yaml: "listen: file:1\n", env: map[string]string{"STREAMCAST_LISTEN": "env:2"}, listen: "env:2", from: "environment STREAMCAST_LISTEN", fileUsed: DefaultFile},
		{name: "empty variable is unset", yaml: "listen: file:1\n", env: map[string]string{"STREAMCAST_LISTEN": ""}, listen: "file:1", from: "config file streamcast.yaml, line 1", fileUsed: DefaultFile},
		{name: "flag beats default", args: []string{"--listen", "flag:3"}, listen: "flag:3", from: "flag --listen"},
		{name: "flag beats file and environment", yaml: "listen: file:1\n", env: map[string]string{"STREAMCAST_LISTEN": "env:2"}, args: []string{"--listen", "flag:3"}, listen: "flag:3", from: "flag --listen", fileUsed: DefaultFile},
		{name: "flag left at its default is unset", yaml: "listen: file:1\n", env: map[string]string{"STREAMCAST_LISTEN": "env:2"}, listen: "env:2", from: "environment STREAMCAST_LISTEN", fileUsed: DefaultFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := resolve(t, tt.yaml, tt.env, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Listen != tt.listen || cfg.From("listen") != tt.from {
				t.Errorf("listen %q from %q, want %q from %q", cfg.Listen, cfg.From("listen"), tt.listen, tt.from)
			}
			if cfg.File() != tt.fileUsed {
				t.Errorf("read file %q, want %q", cfg.File(), tt.fileUsed)
			}
			if len(cfg.Streams) != 1 || cfg.Streams[0].Name != "demo" {
				t.Errorf("streams %+v: a file without streams keeps Embedded's demo stream", cfg.Streams)
			}
		})
	}
}

func TestResolveReadsListsCommaSeparatedAndSwitchesAsTheirValue(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		origins []string
		from    string
	}{
		{name: "environment", env: map[string]string{"STREAMCAST_ALLOWED_ORIGINS": "https://a.example, https://b.example"}, origins: []string{"https://a.example", "https://b.example"}, from: "environment STREAMCAST_ALLOWED_ORIGINS"},
		{name: "flag", args: []string{"--origins", "https://a.example,https://b.example"}, origins: []string{"https://a.example", "https://b.example"}, from: "flag --origins"},
		{name: "flag repeated", args: []string{"--origins", "https://a.example", "--origins", "https://b.example"}, origins: []string{"https://a.example", "https://b.example"}, from: "flag --origins"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := resolve(t, "allowed_origins: [https://file.example]\n", tt.env, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.AllowedOrigins, tt.origins) || cfg.From("allowed_origins") != tt.from {
				t.Errorf("allowed_origins %q from %q, want %q from %q", cfg.AllowedOrigins, cfg.From("allowed_origins"), tt.origins, tt.from)
			}
		})
	}

	env := map[string]string{"STREAMCAST_MAINTAIN_FLUSH_EVERY": "5s"}
	cfg, err := resolve(t, "", env)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Maintain.Enabled || cfg.Maintain.FlushEvery != 5*time.Second {
		t.Fatalf("maintain %+v: want it on, flushing every 5s from the environment", cfg.Maintain)
	}
	cfg, err = resolve(t, "maintain: {seal_every: 1s}\n", env, "--no-maintain")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Maintain.Enabled || cfg.From("maintain") != "flag --no-maintain" || cfg.From("maintain.flush_every") != "flag --no-maintain" {
		t.Fatalf("maintain %+v from %q: want it off by --no-maintain, over the file and the variable inside it", cfg.Maintain, cfg.From("maintain.flush_every"))
	}
}

func TestResolveErrorsNameTheKeyAndWhereItsValueCameFrom(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		args []string
		want string // the whole message
	}{
		{
			name: "unknown key in the file",
			yaml: "listen: x:1\nlimits:\n  max_backlogs: 3\n",
			want: "config file streamcast.yaml, line 3: unknown key limits.max_backlogs (known here: max_backlog, max_inbound, max_in_flight, max_message_bytes, max_where_bytes, max_filter_bytes, max_compression_bytes, idle_timeout, max_connections, max_connections_per_address)",
		},
		{
			name: "wrong type in the file",
			yaml: "limits:\n  max_backlog: lots\n",
			want: "config file streamcast.yaml, line 2: limits.max_backlog: cannot unmarshal !!str `lots` into int",
		},
		{
			name: "wrong type in the environment",
			env:  map[string]string{"STREAMCAST_MAINTAIN_SEAL_EVERY": "often"},
			want: `environment STREAMCAST_MAINTAIN_SEAL_EVERY: maintain.seal_every: "often" is not a duration; give one such as 250ms or 10s, or 0`,
		},
		{
			name: "wrong type by a flag",
			env:  map[string]string{"STREAMCAST_MAINTAIN_SEAL_EVERY": "1s"},
			args: []string{"--seal-every", "often"},
			want: `flag --seal-every: maintain.seal_every: "often" is not a duration; give one such as 250ms or 10s, or 0`,
		},
		{
			name: "not YAML",
			yaml: "listen: [\n",
			want: "config file streamcast.yaml, line 1: not valid YAML: did not find expected node content",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := resolve(t, tt.yaml, tt.env, tt.args...)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestResolveRecordsWhereValuesCameFromForValidate(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		args []string
		from string
	}{
		{name: "file", yaml: "# limits\nlimits:\n  max_backlog: 0\n", from: "config file streamcast.yaml, line 3"},
		{name: "environment", yaml: "limits: {max_backlog: 5}\n", env: map[string]string{"STREAMCAST_LIMITS_MAX_BACKLOG": "0"}, from: "environment STREAMCAST_LIMITS_MAX_BACKLOG"},
		{name: "flag", env: map[string]string{"STREAMCAST_LIMITS_MAX_BACKLOG": "5"}, args: []string{"--max-backlog", "0"}, from: "flag --max-backlog"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := resolve(t, tt.yaml, tt.env, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.Validate()
			var ce *Error
			if !errors.As(err, &ce) || ce.Key != "limits.max_backlog" || ce.From != tt.from {
				t.Fatalf("got %v, want an *Error about limits.max_backlog from %q", err, tt.from)
			}
			if want := tt.from + ": limits.max_backlog is 0; it must be at least 1"; err.Error() != want {
				t.Errorf("message %q, want %q", err, want)
			}
		})
	}
}

func TestResolveReadsTheNamedFileElseTheVariablesElseTheWorkingDirectorys(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, name := range []string{"flag.yaml", "env.conf", DefaultFile} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("log:\n  level: "+strings.TrimSuffix(name, filepath.Ext(name))+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		named, env string
		want       string // the file read
		err        string // or the whole error
	}{
		{named: "flag.yaml", env: "env.conf", want: "flag.yaml"},
		{env: "env.conf", want: "env.conf"}, // any extension is read as YAML
		{want: DefaultFile},
		{named: "missing.yaml", err: "read config: open missing.yaml: no such file or directory"},
		{env: "missing.yaml", err: "read config: open missing.yaml: no such file or directory"},
	}
	for _, tt := range tests {
		t.Setenv(FileVar, tt.env)
		cfg, err := Resolve(Sources{File: tt.named})
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("--config %q, %s=%q: got %v, want %s", tt.named, FileVar, tt.env, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if cfg.File() != tt.want || cfg.From("log.level") != "config file "+tt.want+", line 2" {
			t.Errorf("--config %q, %s=%q: read %q (log.level from %q), want %q", tt.named, FileVar, tt.env, cfg.File(), cfg.From("log.level"), tt.want)
		}
	}

	if err := os.Remove(DefaultFile); err != nil {
		t.Fatal(err)
	}
	t.Setenv(FileVar, "")
	cfg, err := Resolve(Sources{})
	if err != nil {
		t.Fatalf("no ./%s, nothing named: %v; want the embedded default", DefaultFile, err)
	}
	if cfg.File() != "" || cfg.From("listen") != "default" {
		t.Errorf("read %q, listen from %q: want no file and the default", cfg.File(), cfg.From("listen"))
	}
}

func TestResolveRefusesAFlagMarkedForNoKey(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv(FileVar, "")
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.String("lisen", "", "")
	MarkFlag(fs, "lisen", "lisen")
	_, err := Resolve(Sources{Flags: fs})
	if want := "flag --lisen is marked as the form of config key lisen, which config.Config does not have"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func TestEnvVarIsThePrefixAndTheKeyInUpperCase(t *testing.T) {
	for key, want := range map[string]string{
		"log.level":          "STREAMCAST_LOG_LEVEL",
		"limits.max_backlog": "STREAMCAST_LIMITS_MAX_BACKLOG",
		fileKey:              FileVar,
	} {
		if got := EnvVar(key); got != want {
			t.Errorf("EnvVar(%q) = %q, want %q", key, got, want)
		}
	}
	if slices.Contains(OverrideKeys(), fileKey) {
		t.Errorf("%s is a key of Config, so %s would name both the file and that key", fileKey, FileVar)
	}
}

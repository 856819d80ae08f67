package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigParsesDefaultsAndKeepsSchemaOrder(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "b.json"), []byte(`{"type":"object","properties":{"z":{"type":"integer"}},"required":["z"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse([]byte(`
listen: 127.0.0.1:9000
limits: {max_backlog: 10}
log: {level: debug}
streams:
  - name: a
    schema:
      type: object
      properties:
        zeta: {type: integer}
        alpha: {type: [string, "null"]}
        Mixed_Case: {type: number}
      required: [zeta, Mixed_Case]
    sort_by: [zeta]
    max_replay: null
  - name: b
    schema_file: b.json
    durable: false
    max_replay: 7
  - name: c
`), dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:9000" || cfg.Root != DefaultRoot || cfg.Limits.MaxBacklog != 10 || cfg.Limits.MaxInbound != DefaultMaxInbound {
		t.Fatalf("top level %+v", cfg)
	}
	a, b, c := cfg.Streams[0], cfg.Streams[1], cfg.Streams[2]
	if got := string(a.Schema); !strings.Contains(got, `"zeta":{"type":"integer"},"alpha":{"type":["string","null"]},"Mixed_Case"`) {
		t.Fatalf("schema order or case lost: %s", got)
	}
	if a.MaxReplay != nil || !a.Durable || !a.GroupCommit {
		t.Fatalf("a: %+v", a)
	}
	if b.Durable || b.MaxReplay == nil || *b.MaxReplay != 7 || b.SchemaFile != filepath.Join(dir, "b.json") {
		t.Fatalf("b: %+v", b)
	}
	if !c.Durable || c.MaxReplay == nil || *c.MaxReplay != DefaultMaxReplay {
		t.Fatalf("c: %+v", c)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown top key", "listn: x\nstreams: [{name: a}]", "unknown key listn"},
		{"unknown limit", "limits: {max_backlg: 3}\nstreams: [{name: a}]", "unknown key limits.max_backlg"},
		{"unknown stream key", "streams: [{name: a, durabel: false}]", "unknown key streams[0].durabel"},
		{"duplicate names", "streams: [{name: a}, {name: a}]", `streams[1].name "a" is already the name of streams[0]`},
		{"bad schema", "streams: [{name: a, schema: {type: object, properties: {t: {type: string, format: date-time}}, required: [t]}}]", `stream "a" (streams[0]): schema:`},
		{"limit below 1", "limits: {max_in_flight: 0}\nstreams: [{name: a}]", "limits.max_in_flight is 0; it must be at least 1"},
		{"no streams", "listen: x:1", "streams is empty"},
		{"bad name", "streams: [{name: a/b}]", `streams[0].name "a/b" is not a stream name`},
		{"durable root stream", "streams: [{name: ''}]", "empty name"},
		{"the default published directory's name", "streams: [{name: Published}]", `streams[0].name "Published" would be the directory <root>/published`},
		{"names differing only in case", "streams: [{name: trades}, {name: Trades, durable: false}]", `streams[1].name "Trades" differs from streams[0]'s "trades" only in case`},
		{"published inside a stream's home", "root: /srv/data\npublished: /srv/data/a/tables\nstreams: [{name: a}]", `published /srv/data/a/tables is inside the home of stream "a"`},
		{"published at the root", "root: /srv/data\npublished: file:///srv/data\nstreams: [{name: a}]", "published is the root /srv/data itself"},
		{"sort_by unknown", "streams: [{name: a, schema: {type: object, properties: {x: {type: integer}}, required: [x]}, sort_by: [y]}]", `sort_by names "y"`},
		{"both schemas", "streams: [{name: a, schema: {type: object}, schema_file: x.json}]", "both schema and schema_file"},
		{"negative max_replay", "streams: [{name: a, max_replay: -1}]", "max_replay is -1"},
		{"wrong type", "limits: {max_backlog: lots}\nstreams: [{name: a}]", "max_backlog"},
		{"not a ws URL", "streams: [{name: a, upstream: 'http://origin:8765/a'}]", "upstream is not a stream URL"},
		{"no host", "streams: [{name: a, upstream: 'ws:///a'}]", "is not a stream URL"},
		{"a query", "streams: [{name: a, upstream: 'ws://origin:8765/a?offset=5'}]", "has a query"},
		{"a deep path", "streams: [{name: a, upstream: 'ws://origin:8765/x/a'}]", "more than one segment"},
		{"a schema", "streams: [{name: a, upstream: 'ws://origin:8765/a', schema: {type: object}}]", "has upstream: and schema:"},
		{"exactly_once", "streams: [{name: a, upstream: 'ws://origin:8765/a', exactly_once: true}]", "has upstream: and exactly_once:"},
		{"replicate", "streams: [{name: a, upstream: 'ws://origin:8765/a', replicate: true}]", "has upstream: and replicate:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml), "")
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestALiveOnlyStreamKeepsTheEmptyName: a live-only stream has no
// directory, so it may be served at / with the empty name, which the
// stream-name grammar (pkg/meta) does not cover.
func TestALiveOnlyStreamKeepsTheEmptyName(t *testing.T) {
	cfg, err := Parse([]byte("streams: [{name: '', durable: false}, {name: a}]"), "")
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatalf("a live-only stream with the empty name: %v", err)
	}
}

func TestEmbeddedConfigIsValid(t *testing.T) {
	cfg := Embedded()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:8765" || cfg.Root != "./streamcast-data" || cfg.Streams[0].Name != "demo" || !cfg.Streams[0].Durable {
		t.Fatalf("%+v", cfg)
	}
}

func TestAllowedOriginsIsReadFromTheConfigFile(t *testing.T) {
	cfg, err := Parse([]byte("streams: [{name: a}]\nallowed_origins: [https://app.example.com, http://localhost:3000]\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.AllowedOrigins, " "); got != "https://app.example.com http://localhost:3000" {
		t.Fatalf("allowed_origins %q", cfg.AllowedOrigins)
	}
	if cfg, _ := Parse([]byte("streams: [{name: a}]\n"), ""); len(cfg.AllowedOrigins) != 0 {
		t.Fatalf("allowed_origins defaults to %q, want none (any origin)", cfg.AllowedOrigins)
	}
}

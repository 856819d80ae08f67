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
		{"a replica beside the default tables", "root: /srv/data\nstreams: [{name: a, replicate: true}]",
			`line 2: stream "a" (streams[0]) has replicate: true, but its replica would go beside its tables under published the default <root>/published (/srv/data/published), inside root /srv/data, so losing the root loses the replica too; set replicate.destination and published: to places outside the root`},
		{"a replica beside tables in the root", "root: /srv/data\npublished: /srv/data/tables\nstreams: [{name: a, replicate: true}]", "set replicate.destination and published:"},
		{"a destination in the root", "root: /srv/data\nreplicate: {destination: /srv/data/../data/replica}\nstreams: [{name: a}]",
			"line 2: replicate.destination /srv/data/replica is inside root /srv/data, so losing the root loses the replica too; set replicate.destination to a place outside the root, such as replicate: {destination: s3://my-bucket/streamcast-replica}"},
		{"a destination at the root", "root: /srv/data\nreplicate: {destination: 'file:///srv/data'}\nstreams: [{name: a}]", "is inside root /srv/data"},
		{"a destination holding the root", "root: /srv/data/a\npublished: /srv/tables\nreplicate: {destination: /srv/data}\nstreams: [{name: a, replicate: true}]",
			`replicate.destination /srv/data would put stream "a"'s replicas at /srv/data/a, which holds root /srv/data/a`},
		{"a destination without published outside", "root: /srv/data\nreplicate: {destination: /backup/r}\nstreams: [{name: a, replicate: true}]",
			"published is the default <root>/published (/srv/data/published), inside root /srv/data, and restore rebuilds a lost root from the published metadata and tables as well as the replica; set published: to a place outside the root"},
		{"a replicated profile beside its tables", "root: /srv/data\ncontrol: {profiles: {main: {root: /srv/main, replicate: true}}}\nstreams: [{name: a}]",
			"control.profiles.main has replicate: true, but its replica would go beside its tables under published the default <root>/published (/srv/main/published), inside root /srv/main"},
		{"a destination in a replicated profile's root", "root: /srv/data\nreplicate: {destination: /srv/main/replica}\ncontrol: {profiles: {main: {root: /srv/main, published: /srv/tables, replicate: true}}}\nstreams: [{name: a}]",
			"control.profiles.main has replicate: true, but replicate.destination /srv/main/replica is inside its root /srv/main"},
		{"a destination of another scheme", "replicate: {destination: 'ftp://host/r'}\nstreams: [{name: a}]", "replicate.destination: location \"ftp://host/r\" has scheme ftp://"},
		{"a destination with credentials", "replicate: {destination: 's3://key:secret@bucket/r'}\nstreams: [{name: a}]", "replicate.destination: the location names credentials"},
		{"a destination that is no string", "replicate: {destination: [a]}\nstreams: [{name: a}]", "replicate.destination: give a place"},
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

// TestReplicaOutsideTheRootIsAccepted: a replicated stream whose replica and
// published tables lie outside the root is served, with or without a
// destination of its own, and serve's replicate child is told the
// destination resolved to an absolute place.
func TestReplicaOutsideTheRootIsAccepted(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, yaml, dest string }{
		{"a destination", "root: /srv/data\npublished: /srv/tables\nreplicate: {destination: /backup/r}\nstreams: [{name: a, replicate: true}]", "/backup/r"},
		{"a relative destination", "root: data\npublished: tables\nreplicate: {destination: replica}\nstreams: [{name: a, replicate: true}]", filepath.Join(wd, "replica")},
		{"beside tables outside the root", "root: /srv/data\npublished: /srv/tables\nstreams: [{name: a, replicate: true}]", ""},
		{"beside tables in S3", "root: /srv/data\npublished: s3://bucket/t\nstreams: [{name: a, replicate: true}]", ""},
		{"an S3 destination", "root: /srv/data\npublished: /srv/tables\ns3: {endpoint: 'http://127.0.0.1:9000'}\nreplicate: {destination: s3://bucket/r}\nstreams: [{name: a, replicate: true}]", "s3://bucket/r"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte(c.yaml), "")
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			a, err := cfg.ReplicaArgs()
			if err != nil {
				t.Fatal(err)
			}
			if a.Destination != c.dest {
				t.Fatalf("the replicate child is told --destination %q, want %q", a.Destination, c.dest)
			}
			if (a.S3.Endpoint != "") != (c.name == "an S3 destination") {
				t.Fatalf("the replicate child is told the S3 settings %+v", a.S3)
			}
		})
	}
}

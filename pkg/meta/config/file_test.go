package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// fullConfig sets a value other than the default in every section.
const fullConfig = `listen: 127.0.0.1:9001
root: /srv/streamcast
limits: {max_backlog: 10, max_inbound: 20, max_in_flight: 3, max_message_bytes: 4096}
streams:
  - name: trades
    schema:
      type: object
      properties:
        Zeta: {type: integer}
        alpha: {type: [string, "null"]}
        "null": {type: string}
        "1": {type: boolean}
      required: [Zeta, "null", "1"]
    sort_by: [Zeta]
    max_replay: null
    exactly_once: true
  - name: live
    durable: false
    group_commit: false
maintain: {seal_every: 1s, compact_every: 0, flush_every: 2m}
published: s3://bucket/prefix
s3: {endpoint: "http://127.0.0.1:7070", region: eu-west-3, path_style: true}
tiers: {target_seal_bytes: 8MiB, staging_retention: 2h, delete_grace: 90m}
log: {level: warn, format: json}
`

func TestPrintedConfigReadsBackToItself(t *testing.T) {
	for name, data := range map[string]string{"every section set": fullConfig, "empty file": "", "maintain off": "maintain: false\n"} {
		t.Run(name, func(t *testing.T) {
			cfg, err := Load(Embedded(), "streamcast.yaml", []byte(data))
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			for _, format := range []string{"yaml", "json"} {
				render := Config.YAML
				if format == "json" {
					render = Config.JSON
				}
				printed, err := render(cfg)
				if err != nil {
					t.Fatal(err)
				}
				again, err := Load(Embedded(), "printed."+format, printed)
				if err != nil {
					t.Fatalf("%s does not read back: %v\n%s", format, err, printed)
				}
				if got, want := comparable(t, again), comparable(t, cfg); !reflect.DeepEqual(got, want) {
					t.Errorf("%s read back differs:\n got %+v\nwant %+v\nprinted:\n%s", format, got, want, printed)
				}
			}
		})
	}
}

// comparable is c with what may differ between equal configurations made
// equal: where values came from, the spacing of schemas' JSON, and empty
// lists against nil ones (both print as []).
func comparable(t *testing.T, c Config) Config {
	t.Helper()
	c.origin = nil
	c.Streams = slices.Clone(c.Streams)
	for i := range c.Streams {
		if len(c.Streams[i].Schema) == 0 {
			continue
		}
		var b bytes.Buffer
		if err := json.Compact(&b, c.Streams[i].Schema); err != nil {
			t.Fatal(err)
		}
		c.Streams[i].Schema = b.Bytes()
	}
	v := reflect.ValueOf(&c).Elem()
	var nilEmpty func(v reflect.Value)
	nilEmpty = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					nilEmpty(v.Field(i))
				}
			}
		case reflect.Slice:
			if v.Len() == 0 {
				v.SetZero()
			}
			for i := range v.Len() {
				nilEmpty(v.Index(i))
			}
		}
	}
	nilEmpty(v)
	return c
}

// fieldType is the type of Config's field at a key path, found by yaml tag.
func fieldType(t *testing.T, key string) reflect.Type {
	t.Helper()
	typ := reflect.TypeFor[Config]()
	for part := range strings.SplitSeq(key, ".") {
		if typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		f, ok := typ.FieldByNameFunc(func(name string) bool {
			sf, _ := typ.FieldByName(name)
			tag, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			return tag == part
		})
		if !ok {
			t.Fatalf("no field for %s of %s", part, key)
		}
		typ = f.Type
	}
	return typ
}

func TestEveryOverrideKeyReachesTheConfig(t *testing.T) {
	keys := OverrideKeys()
	for _, want := range []string{"listen", "root", "limits.max_backlog", "maintain.seal_every", "published", "s3.path_style", "tiers.delete_grace", "log.level"} {
		if !strings.Contains(" "+strings.Join(keys, " ")+" ", " "+want+" ") {
			t.Errorf("OverrideKeys lacks %s: %v", want, keys)
		}
	}
	base := Embedded()
	basePrinted, _ := base.YAML()
	for _, key := range keys {
		if strings.HasPrefix(key, "streams") {
			t.Errorf("OverrideKeys holds %s: streams come from the file only", key)
		}
		typ := fieldType(t, key)
		value := map[reflect.Kind]string{reflect.String: "s3://b/p", reflect.Bool: "true", reflect.Int: "5", reflect.Int64: "7"}[typ.Kind()]
		switch {
		case typ == reflect.TypeFor[time.Duration]():
			value = "3s"
		case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.String:
			value = "a,b" // a list: comma-separated
		}
		switch key {
		case "log.level":
			value = "debug"
		case "log.format":
			value = "json"
		case "listen", "root":
			value = "x:1"
		case "metrics.enabled", "compression":
			value = "false" // true is its default
		}
		if value == "" {
			t.Errorf("no test value for %s (%s): extend this test", key, typ)
			continue
		}
		cfg, err := Load(base, "", nil, Override{Key: key, Value: value, From: "test"})
		if err != nil {
			t.Errorf("%s=%s: %v", key, value, err)
			continue
		}
		if printed, _ := cfg.YAML(); string(printed) == string(basePrinted) {
			t.Errorf("%s=%s changed nothing", key, value)
		}
		if from := cfg.From(key); from != "test" {
			t.Errorf("%s comes from %q, want the override's", key, from)
		}
	}
}

func TestFileKeysAreCheckedAgainstEverySection(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"log: {lvl: debug}", "line 1: unknown key log.lvl (known here: level, format, access)"},
		{"s3: {bucket: b}", "line 1: unknown key s3.bucket (known here: endpoint, region, path_style)"},
		{"metrics: {path: /m}", "line 1: unknown key metrics.path (known here: enabled, public)"},
		{"tiers: {retention: 1h}", "line 1: unknown key tiers.retention"},
		{"maintain: {seal: 1s}", "line 1: unknown key maintain.seal (known here: seal_every,"},
		{"streams:\n  - name: a\n    durabel: true", "line 3: unknown key streams[0].durabel"},
		{"limits:\n  max_backlog: 1\n  max_backlog: 2", "line 3: key limits.max_backlog is given twice"},
		{"tiers: {aws_secret_access_key: x}", "line 1: key tiers.aws_secret_access_key: credentials are never config"},
		{"streams: {name: a}", "line 1: streams is a list"},
		{"- a", "line 1: the config is a mapping of listen, root,"},
	} {
		_, err := Parse([]byte(tc.yaml), "")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q…", tc.yaml, err, tc.want)
		}
	}
}

func TestValidateSaysWhereTheValueCameFrom(t *testing.T) {
	data := []byte("# a comment\nstreams:\n  - name: a\n    max_replay: -1\n")
	for _, tc := range []struct {
		over      []Override
		key, want string
	}{
		{nil, "streams[0].max_replay", `config file x.yaml, line 4: stream "a" (streams[0]): max_replay is -1`},
		{[]Override{{Key: "limits.max_inbound", Value: "0", From: "flag --x"}}, "limits.max_inbound", "flag --x: limits.max_inbound is 0; it must be at least 1"},
		{[]Override{{Key: "log.format", Value: "xml", From: "environment STREAMCAST_LOG_FORMAT"}}, "log.format", `environment STREAMCAST_LOG_FORMAT: log.format "xml" is not one of text, json`},
		{[]Override{{Key: "tiers.delete_grace", Value: "-1s", From: "environment X"}}, "tiers.delete_grace", "environment X: tiers.delete_grace is negative"},
	} {
		cfg, err := Load(Default(), "x.yaml", data, tc.over...)
		if err != nil {
			t.Fatal(err)
		}
		if tc.over == nil {
			err = cfg.Validate()
		} else {
			cfg.Streams[0].MaxReplay = nil
			err = cfg.Validate()
		}
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != tc.key || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("got %v (key %v), want key %s and %q…", err, ce, tc.key, tc.want)
		}
	}
}

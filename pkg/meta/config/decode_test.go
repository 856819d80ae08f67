package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestRenderingRedactsSecretsAtAnyDepth(t *testing.T) {
	type user struct {
		Name string `yaml:"name"`
		Hash string `yaml:"password_hash" secret:"true"`
	}
	type section struct {
		Users  []user   `yaml:"users"`
		Token  *string  `yaml:"token" secret:"true"`
		Keys   []string `yaml:"keys" secret:"true"`
		Public string   `yaml:"public"`
	}
	tok := "tok-123"
	v := section{Users: []user{{Name: "ann", Hash: "$2a$hash-1"}}, Token: &tok, Keys: []string{"key-2"}, Public: "visible"}
	out, err := renderJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"hash-1", "tok-123", "key-2"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("rendering shows the secret %q: %s", secret, out)
		}
	}
	if !strings.Contains(string(out), `"password_hash":"[redacted]"`) || !strings.Contains(string(out), "visible") || !strings.Contains(string(out), "ann") {
		t.Errorf("rendering %s: want the hash redacted and the rest shown", out)
	}
	if v.Users[0].Hash != "$2a$hash-1" || tok != "tok-123" || v.Keys[0] != "key-2" {
		t.Errorf("redaction changed the value it rendered: %+v", v)
	}
}

type testItem struct {
	Name string `yaml:"name"`
}

type testConfig struct {
	Addr  string     `yaml:"addr"`
	Items []testItem `yaml:"items"`
	Inner struct {
		N    int      `yaml:"n"`
		Tags []string `yaml:"tags"`
	} `yaml:"inner"`
}

func TestLoadLaysTheFileThenOverridesOverTheBase(t *testing.T) {
	cfg := testConfig{Addr: "base", Items: []testItem{{Name: "base-item"}}}
	cfg.Inner.N = 1
	origins, err := decodeInto(&cfg, decodeSource{
		File: "c.yaml",
		Data: []byte("addr: file\nitems: []\ninner:\n  n: 2\n"),
		Overrides: []Override{
			{Key: "inner.tags", Value: "a, b", From: "environment T"},
			{Key: "addr", Value: "flag", From: "flag --addr"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "flag" || cfg.Inner.N != 2 || strings.Join(cfg.Inner.Tags, "|") != "a|b" || len(cfg.Items) != 1 {
		t.Errorf("got %+v", cfg)
	}
	for key, want := range map[string]string{"addr": "flag --addr", "inner.n": "config file c.yaml, line 4", "inner.tags": "environment T", "items": "default"} {
		if got := origins.From(key); got != want {
			t.Errorf("%s from %q, want %q", key, got, want)
		}
	}
	if got := keysOf(reflect.TypeFor[testConfig]()); strings.Join(got, " ") != "addr inner.n inner.tags" {
		t.Errorf("keysOf: %v", got)
	}
}

func TestLoadRefusesNamingTheKeyAndWhere(t *testing.T) {
	for _, tc := range []struct {
		data string
		over []Override
		want string
	}{
		{"inner:\n  m: 1\n", nil, "config file c.yaml, line 2: unknown key inner.m (known here: n, tags)"},
		{"items:\n  - name: a\n  - nme: b\n", nil, "config file c.yaml, line 3: unknown key items[1].nme (known here: name)"},
		{"password: x\n", nil, "config file c.yaml, line 1: key password: looks like a secret"},
		{"inner: {n: many}\n", nil, "config file c.yaml, line 1: inner.n: cannot unmarshal !!str `many` into int"},
		{"", []Override{{Key: "inner.n", Value: "many", From: "environment N"}}, "environment N: inner.n: cannot unmarshal !!str `many` into int"},
		{"", []Override{{Key: "nope", Value: "1", From: "flag --nope"}}, "flag --nope: nope is not a configuration key"},
	} {
		var cfg testConfig
		_, err := decodeInto(&cfg, decodeSource{File: "c.yaml", Data: []byte(tc.data), Overrides: tc.over, Unknown: func(k string) error {
			if k == "password" {
				return errors.New("looks like a secret")
			}
			return nil
		}})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q %v: got %v, want %q", tc.data, tc.over, err, tc.want)
		}
	}
}

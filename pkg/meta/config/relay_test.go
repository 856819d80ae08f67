package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/internal/testkit"
)

// TestARelayStreamParses: upstream: makes a relay, with or without a log,
// and its credentials stay out of the URL the server names.
func TestARelayStreamParses(t *testing.T) {
	cfg, err := Parse([]byte(`
streams:
  - name: trades
    upstream: ws://reader:s%40cret@origin:8765/trades
    durable: true
  - name: ticks
    upstream: wss://origin:8765/ticks
    durable: false
`), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a, b := cfg.Streams[0], cfg.Streams[1]
	if !a.IsRelay() || !b.IsRelay() || !a.Durable || b.Durable {
		t.Fatalf("streams %+v %+v", a, b)
	}
	clean, cred, err := a.UpstreamURL()
	if err != nil || clean != "ws://origin:8765/trades" || cred.Username() != "reader" {
		t.Fatalf("UpstreamURL = %q, %v, %v", clean, cred, err)
	}
	if pw, _ := cred.Password(); pw != "s@cret" {
		t.Fatalf("password %q, want it percent-decoded", pw)
	}
}

// TestConfigPrintsARelaysUpstreamRedacted: the URL may hold a password, so
// every rendering hides it, and the rendering read back says what to do.
func TestConfigPrintsARelaysUpstreamRedacted(t *testing.T) {
	cfg, err := Parse([]byte("streams: [{name: a, upstream: 'ws://u:hunter2@origin:8765/a'}]"), "")
	if err != nil {
		t.Fatal(err)
	}
	y, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(y), "hunter2") || !strings.Contains(string(y), "[redacted]") {
		t.Fatalf("config renders the upstream's password:\n%s", y)
	}
	back, err := Parse(y, "")
	if err == nil {
		err = back.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), "give the URL itself") {
		t.Fatalf("the rendering read back: %v", err)
	}
}

// TestUpstreamCAFileIsCheckedAtLoad: upstream_ca_file: is resolved against
// the config file's directory and read when the config is validated; a
// missing file, one with no certificate, one without upstream: or with a
// ws:// upstream are refused, naming the key.
func TestUpstreamCAFileIsCheckedAtLoad(t *testing.T) {
	dir := t.TempDir()
	ca, err := testkit.NewCA("config test CA")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteCert(filepath.Join(dir, "ca.crt")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "junk.crt"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	load := func(doc string) (Config, error) {
		cfg, err := Load(Default(), filepath.Join(dir, "streamcast.yaml"), []byte(doc))
		if err == nil {
			err = cfg.Validate()
		}
		return cfg, err
	}
	cfg, err := load("streams: [{name: a, upstream: 'wss://origin:8765/a', upstream_ca_file: ca.crt}]")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Streams[0].UpstreamCAFile; got != filepath.Join(dir, "ca.crt") {
		t.Fatalf("upstream_ca_file resolved to %q", got)
	}
	if tc, err := cfg.Streams[0].UpstreamTLS(); err != nil || tc == nil || tc.RootCAs == nil {
		t.Fatalf("UpstreamTLS = %v, %v", tc, err)
	}
	for doc, want := range map[string]string{
		"streams: [{name: a, upstream: 'wss://origin:8765/a', upstream_ca_file: missing.crt}]": "missing.crt",
		"streams: [{name: a, upstream: 'wss://origin:8765/a', upstream_ca_file: junk.crt}]":    "no PEM certificate",
		"streams: [{name: a, upstream: 'ws://origin:8765/a', upstream_ca_file: ca.crt}]":       "is for a wss:// upstream",
		"streams: [{name: a, durable: false, upstream_ca_file: ca.crt}]":                       "no upstream:",
	} {
		if _, err := load(doc); err == nil || !strings.Contains(err.Error(), "upstream_ca_file") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error on upstream_ca_file saying %q", doc, err, want)
		}
	}
}

package config

import (
	"strings"
	"testing"
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

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

func TestRelayConfigErrorsNameTheKey(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
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
			if strings.Contains(tc.yaml, "@") && strings.Contains(err.Error(), "@") {
				t.Fatalf("the error shows the URL's credentials: %v", err)
			}
		})
	}
}

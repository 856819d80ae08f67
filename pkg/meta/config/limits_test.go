package config

import (
	"strings"
	"testing"
)

// TestAStreamSetsItsOwnLimitsOverTheServers: a stream's limits: replace
// the server's key by key; a key left out keeps the server's.
func TestAStreamSetsItsOwnLimitsOverTheServers(t *testing.T) {
	cfg, err := Parse([]byte(`
limits: {max_backlog: 100, max_message_bytes: 5000}
streams:
  - name: small
    limits: {max_backlog: 7, max_message_bytes: 1000}
  - name: plain
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	small, plain := cfg.Streams[0].Limits.Over(cfg.Limits), cfg.Streams[1].Limits.Over(cfg.Limits)
	if small.MaxBacklog != 7 || small.MaxMessageBytes != 1000 || small.MaxInbound != DefaultMaxInbound {
		t.Errorf("small runs with %+v; want max_backlog 7, max_message_bytes 1000, the server's max_inbound", small)
	}
	if plain != cfg.Limits {
		t.Errorf("plain runs with %+v; want the server's %+v", plain, cfg.Limits)
	}
}

// TestAStreamsLimitsOfZeroOrNullAreRefused: 0, null, a negative bound and
// a max_message_bytes over the server's are refused, naming the key,
// never dropped for the server's.
func TestAStreamsLimitsOfZeroOrNullAreRefused(t *testing.T) {
	for _, c := range []struct{ limits, want string }{
		{"{max_backlog: 0}", "streams[0].limits.max_backlog is 0; give a positive number"},
		{"{max_in_flight: -1}", "streams[0].limits.max_in_flight is -1"},
		{"{max_inbound: null}", "limits.max_inbound is null; give a positive number"},
		{"{max_message_bytes: 2000000}", "streams[0].limits.max_message_bytes is 2000000, over the server's limits.max_message_bytes 1048576"},
		{"{max_where_bytes: 10}", "unknown key streams[0].limits.max_where_bytes"},
	} {
		cfg, err := Parse([]byte("streams:\n  - name: s\n    limits: "+c.limits+"\n"), t.TempDir())
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("limits: %s: %v; want %q", c.limits, err, c.want)
		}
	}
}

// TestStatsMovesOrTurnsOff: stats: takes a path or false, and refuses a
// path that is not absolute or that serve answers otherwise.
func TestStatsMovesOrTurnsOff(t *testing.T) {
	for _, c := range []struct{ yaml, path, err string }{
		{"", "/stats", ""},
		{"stats: true", "/stats", ""},
		{"stats: false", "", ""},
		{"stats: /ops/stats", "/ops/stats", ""},
		{"stats: ops", "", `stats "ops" is not an absolute path`},
		{"stats: /health", "", "one of serve's own routes"},
		{"stats: /control/v1/x", "", "one of serve's own routes"},
		{"stats: /S", "", `the path of the stream "s"`},
	} {
		cfg, err := Parse([]byte(c.yaml+"\nstreams:\n  - name: s\n"), t.TempDir())
		if err == nil {
			err = cfg.Validate()
		}
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: %v; want %q", c.yaml, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%q: %v", c.yaml, err)
		case c.err == "" && cfg.Stats.Path() != c.path:
			t.Errorf("%q: path %q; want %q", c.yaml, cfg.Stats.Path(), c.path)
		}
	}
}

// TestServerURLIsTheListenAddressWithTheTLSScheme: a client on this
// machine reaches the server at listen:, https with tls:, 127.0.0.1 for
// an unspecified host; a listen: of port 0 names no address.
func TestServerURLIsTheListenAddressWithTheTLSScheme(t *testing.T) {
	for _, c := range []struct{ listen, cert, want string }{
		{"127.0.0.1:8765", "", "http://127.0.0.1:8765"},
		{":9000", "", "http://127.0.0.1:9000"},
		{"0.0.0.0:9000", "server.pem", "https://127.0.0.1:9000"},
		{"[::1]:9000", "", "http://[::1]:9000"},
		{"[::]:8765", "", "http://[::1]:8765"},
		{"example.com:443", "server.pem", "https://example.com:443"},
		{"127.0.0.1:0", "", ""},
	} {
		cfg := Default()
		cfg.Listen, cfg.TLS.CertFile = c.listen, c.cert
		got, err := cfg.ServerURL()
		if got != c.want || (c.want == "") != (err != nil) {
			t.Errorf("listen %q, cert %q: %q, %v; want %q", c.listen, c.cert, got, err, c.want)
		}
	}
}

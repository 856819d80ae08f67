package config

import (
	"errors"
	"strings"
	"testing"
)

// testHash is bcrypt of "x" at cost 4.
const testHash = "$2a$04$C6UzMDM.H6dfI/f/IKcEeO5P5ljBrgy/pElK0xo6zRUu2zXKEbIw6"

func TestAuthSectionIsReadAndChecked(t *testing.T) {
	const head = "streams: [{name: trades, durable: false}]\n"
	good := head + `auth:
  users:
    - name: alice
      password_hash: "` + testHash + `"
  grants:
    - principals: [alice, "*", anonymous]
      actions: [read, publish, stats]
      streams: [trades, "fx.*", "*"]
`
	cfg, err := Load(Default(), "s.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Auth == nil || len(cfg.Auth.Users) != 1 || cfg.Auth.Grants[0].Streams[1] != "fx.*" {
		t.Fatalf("auth: %+v", cfg.Auth)
	}
	// No auth: section is no auth; an empty one grants nothing but is auth.
	if cfg, _ := Parse([]byte(head), ""); cfg.Auth != nil {
		t.Fatal("no auth: section gave an Auth")
	}
	if cfg, _ := Parse([]byte(head+"auth: {}\n"), ""); cfg.Auth == nil || cfg.Validate() != nil {
		t.Fatal("auth: {} is not an empty, valid section")
	}
	// config prints the hash redacted.
	y, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(y), testHash) || !strings.Contains(string(y), "[redacted]") {
		t.Fatalf("config prints the hash:\n%s", y)
	}

	bad := []struct {
		name, section, key, msg string
	}{
		{"reserved user name", "  users: [{name: anonymous, password_hash: '" + testHash + "'}]\n", "auth.users[0].name", "reserved"},
		{"colon in a user name", "  users: [{name: 'a:b', password_hash: '" + testHash + "'}]\n", "auth.users[0].name", "cannot carry"},
		{"duplicate user", "  users: [{name: a, password_hash: '" + testHash + "'}, {name: a, password_hash: '" + testHash + "'}]\n", "auth.users[1].name", "already the name"},
		{"a password for a hash", "  users: [{name: a, password_hash: 'hunter2-plain'}]\n", "auth.users[0].password_hash", "is not a bcrypt hash"},
		{"a redacted hash", "  users: [{name: a, password_hash: '[redacted]'}]\n", "auth.users[0].password_hash", "paste the hash itself"},
		{"unknown principal", "  grants: [{principals: [mallory], actions: [read], streams: ['*']}]\n", "auth.grants[0].principals[0]", "no user of auth.users"},
		{"unknown action", "  grants: [{principals: ['*'], actions: [write], streams: ['*']}]\n", "auth.grants[0].actions[0]", "not an action"},
		{"inner star", "  grants: [{principals: ['*'], actions: [read], streams: ['a*b']}]\n", "auth.grants[0].streams[0]", "* may only end a prefix"},
		{"empty streams", "  grants: [{principals: ['*'], actions: [read]}]\n", "auth.grants[0].streams", "gives nothing"},
	}
	for _, c := range bad {
		cfg, err := Load(Default(), "s.yaml", []byte(head+"auth:\n"+c.section))
		if err == nil {
			err = cfg.Validate()
		}
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != c.key || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "s.yaml, line 3") {
			t.Errorf("%s: %v want key %s, line 3, saying %q", c.name, err, c.key, c.msg)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error repeats the value: %v", c.name, err)
		}
	}
}

func TestGrantsNameCertificatesOnlyUnderMutualTLS(t *testing.T) {
	a := &Auth{Grants: []Grant{{Principals: []string{"dashboard.example.com"}, Actions: []string{"stats"}, Streams: []string{"*"}}}}
	if err := a.validate(false); err == nil {
		t.Fatal("a grant to no user passed without mutual TLS")
	}
	if err := a.validate(true); err != nil {
		t.Fatalf("a grant to a certificate's name under mutual TLS: %v", err)
	}
}

package auth

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/broker/config"
)

// FuzzParseBasic feeds arbitrary Authorization values to the parser: no
// panic, and what it accepts is a non-empty user without a colon that
// encodes back to credentials it reads the same.
func FuzzParseBasic(f *testing.F) {
	f.Add("Basic " + base64.StdEncoding.EncodeToString([]byte("alice:pw")))
	f.Add("basic   " + base64.StdEncoding.EncodeToString([]byte("a:b:c")))
	f.Add("Basic " + base64.StdEncoding.EncodeToString([]byte(":nouser")))
	f.Add("Basic " + base64.StdEncoding.EncodeToString([]byte("nocolon")))
	f.Add("Bearer abc")
	f.Add("Basic !!!")
	f.Add("Basic")
	f.Add("Basic " + strings.Repeat("QUFB", 2000))
	f.Fuzz(func(t *testing.T, h string) {
		user, pw, ok := ParseBasic(h)
		if !ok {
			if user != "" || pw != "" {
				t.Fatalf("refused %q but returned %q, %q", h, user, pw)
			}
			return
		}
		if user == "" || strings.Contains(user, ":") {
			t.Fatalf("accepted %q with user %q", h, user)
		}
		u2, pw2, ok2 := ParseBasic("Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw)))
		if !ok2 || u2 != user || pw2 != pw {
			t.Fatalf("%q: re-encoded credentials read back as %q %q %v", h, u2, pw2, ok2)
		}
	})
}

// FuzzAuthConfig feeds arbitrary YAML to the config parser with an auth:
// section in mind: a bad section is an error, never a panic, and an
// accepted one compiles into a policy that answers without panicking.
func FuzzAuthConfig(f *testing.F) {
	h := "$2a$04$C6UzMDM.H6dfI/f/IKcEeO5P5ljBrgy/pElK0xo6zRUu2zXKEbIw6" // bcrypt of "x" at cost 4
	f.Add([]byte("streams: [{name: t, durable: false}]\nauth:\n  users: [{name: alice, password_hash: '" + h + "'}]\n  grants: [{principals: [alice], actions: [read], streams: ['t*']}]\n"))
	f.Add([]byte("streams: [{name: t, durable: false}]\nauth: {grants: [{principals: [anonymous, '*'], actions: [stats], streams: ['*']}]}\n"))
	f.Add([]byte("streams: [{name: t, durable: false}]\nauth: {users: [{name: anonymous, password_hash: x}]}\n"))
	f.Add([]byte("streams: [{name: t, durable: false}]\nauth: {grants: [{principals: [nobody], actions: [write], streams: ['a*b']}]}\n"))
	f.Add([]byte("streams: [{name: t, durable: false}]\nauth: {}\n"))
	f.Add([]byte("auth: [1, 2]\n"))
	f.Add([]byte("auth: {users: [{name: 'a:b', password: secret}]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse(data, "") // no schema_file is read relative to anything
		if err != nil || cfg.Validate() != nil || cfg.Auth == nil {
			return
		}
		p := New(cfg.Auth, nil)
		for _, who := range []string{Anonymous, "alice", "*"} {
			for _, act := range config.Actions() {
				_ = p.Allows(who, act, "t")
				_ = p.AllowsEverywhere(who, act)
			}
		}
		for _, u := range cfg.Auth.Users {
			if u.Name == "" || u.Name == Anonymous || u.Name == config.PrincipalAnyUser || strings.Contains(u.Name, ":") {
				t.Fatalf("validated a user named %q", u.Name)
			}
		}
	})
}

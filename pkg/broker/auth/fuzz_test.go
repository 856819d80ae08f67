package auth

import (
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/meta/config"
)

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
		p := New(cfg.Auth, nil, nil)
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

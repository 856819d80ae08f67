package config

import "testing"

// FuzzParseConfig feeds arbitrary YAML to the config parser and validator:
// a bad file is an error naming the problem, never a panic.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("listen: 127.0.0.1:0\nroot: ./data\nstreams:\n  - name: t\n    schema: {type: object, properties: {a: {type: integer}}, required: [a]}\n"))
	f.Add([]byte("streams: [{name: a, durable: false}, {name: a}]\n"))
	f.Add([]byte("limits: {max_backlog: 0}\nmaintain: {seal_every: soon}\n"))
	f.Add([]byte("published: s3://b/p\ns3: {endpoint: http://127.0.0.1:1, secret: x}\ntiers: {target_file_bytes: 1GB}\n"))
	f.Add([]byte("streams:\n  - name: x\n    schema: '{\"type\":\"object\",\"properties\":{\"s\":{\"type\":[\"string\",\"null\"]}}}'\n    sort_by: [s]\n"))
	f.Add([]byte("maintain: false\nstreams: ~\n"))
	f.Add([]byte("tls: {cert_file: a.crt, key_file: a.key, client_ca_file: ca.crt}\n"))
	f.Add([]byte("tls: {client_ca_file: ca.crt}\n"))
	f.Add([]byte("- just\n- a list\n"))
	f.Add([]byte("streams: [{name: t}]\nauth:\n  users: [{name: alice, password_hash: '$2a$04$C6UzMDM.H6dfI/f/IKcEeO5P5ljBrgy/pElK0xo6zRUu2zXKEbIw6'}]\n  grants: [{principals: [alice, '*'], actions: [read, stats], streams: ['fx.*']}]\n"))
	f.Add([]byte("streams: [{name: t}]\nauth: {users: [{name: 'a:b', password_hash: x}], grants: [{principals: [z], actions: [write], streams: ['a*b']}]}\n"))
	// One directory for every execution: Parse only resolves relative
	// paths against it, and making one per execution cost more than the
	// parse.
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, dir)
		if err == nil {
			_ = cfg.Validate()
		}
	})
}

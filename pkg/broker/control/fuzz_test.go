package control

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/meta/config"
)

// FuzzParseDeclaration: no body panics the parser; what checkJSON passes
// is valid JSON without a duplicate key; a declaration that parses and
// checks turns into a stream the server can compile.
func FuzzParseDeclaration(f *testing.F) {
	for _, s := range []string{
		`{"schema":{"type":"object","properties":{"a":{"type":"integer"}}},"storage_profile":"local"}`,
		`{"schema":{},"schema":{}}`,
		`{"max_replay":1e999}`,
		`{"max_replay":null,"limits":{"max_backlog":5}}`,
		`{"sort_by":["a","a"],"schema":{"type":"object","properties":{"a":{"type":"integer"}}},"storage_profile":"local"}`,
		`[1,2,{"a":{"b":{"a":1,"a":2}}}]`,
		`{"a":1} {"b":2}`,
		`"\ud800"`, `-0`, `1E400`, `{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
	} {
		f.Add([]byte(s))
	}
	cfg := config.Default()
	cfg.Control = &config.Control{MaxPending: 1, MaxBytes: 1 << 10, Profiles: map[string]config.Profile{"local": {}}}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := checkJSON(b); err == nil && !json.Valid(b) {
			t.Fatalf("checkJSON passed invalid JSON %q", b)
		}
		d, err := ParseDeclaration(b)
		if err != nil {
			return
		}
		sch, err := d.Check(&cfg)
		if err != nil {
			return
		}
		st := d.Stream("s", &cfg)
		one := cfg
		one.Root = t.TempDir()
		one.Streams = []config.Stream{st}
		if _, err := one.Compile(); err != nil {
			t.Fatalf("declaration %s checked, but its stream does not compile: %v (schema %s)", b, err, sch.JSON())
		}
	})
}

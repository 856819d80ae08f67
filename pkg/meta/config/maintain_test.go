package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore"
)

func TestMaintainSectionSaysWhichRolesRun(t *testing.T) {
	all := []logstore.Role{logstore.RoleSeal, logstore.RoleCompact, logstore.RolePublish, logstore.RoleClean, logstore.RoleCleanPublished, logstore.RoleRetain}
	cases := []struct {
		name, yaml string
		roles      []logstore.Role
		flush      time.Duration
	}{
		{"absent: every role", "", all, DefaultFlushEvery},
		{"true: every role", "maintain: true", all, DefaultFlushEvery},
		{"null: every role", "maintain:", all, DefaultFlushEvery},
		{"false: none", "maintain: false", nil, DefaultFlushEvery},
		{"0 and null turn roles off", "maintain: {compact_every: 0, clean_published_every: null, retain_every: 0, flush_every: 1s}",
			[]logstore.Role{logstore.RoleSeal, logstore.RolePublish, logstore.RoleClean}, time.Second},
		{"intervals are kept", "maintain: {seal_every: 1s, flush_every: 0}", all, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml+"\nstreams: [{name: a}]\n"), "")
			if err == nil {
				err = cfg.Validate()
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []logstore.Role
			for _, r := range cfg.Maintain.Roles() {
				got = append(got, r.Role)
			}
			if strings.Join(roleNames(got), ",") != strings.Join(roleNames(tc.roles), ",") || cfg.Maintain.FlushEvery != tc.flush {
				t.Fatalf("roles %v flush %s, want %v flush %s", got, cfg.Maintain.FlushEvery, tc.roles, tc.flush)
			}
		})
	}
	cfg, _ := Parse([]byte("maintain: {seal_every: 1s}\nstreams: [{name: a}]"), "")
	if r := cfg.Maintain.Roles(); r[0].Every != time.Second || r[1].Every != DefaultCompactEvery {
		t.Fatalf("intervals %+v: a key given replaces its default only", r)
	}
}

func TestMaintainMaxOpenLogsReachesTheChildren(t *testing.T) {
	for yaml, want := range map[string]int{"": logstore.DefaultMaxOpen, "maintain: {max_open_logs: 5}": 5} {
		cfg, err := Parse([]byte(yaml+"\nstreams: [{name: a}]\n"), "")
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil || cfg.Maintain.MaxOpenLogs != want {
			t.Fatalf("%q: max_open_logs %d (%v), want %d", yaml, cfg.Maintain.MaxOpenLogs, err, want)
		}
	}
}

func roleNames(rs []logstore.Role) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

func TestMaintainSectionErrorsNameTheKey(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"unknown key", "maintain: {seal_evry: 1s}", "unknown key maintain.seal_evry (known here: seal_every,"},
		{"not a duration", "maintain: {seal_every: soon}", `maintain.seal_every: "soon" is not a duration`},
		{"no unit", "maintain: {clean_every: 10}", "maintain.clean_every: 10 has no unit"},
		{"negative", "maintain: {publish_every: -1s}", "maintain.publish_every is -1s; give a positive duration, or 0"},
		{"negative flush", "maintain: {flush_every: -1s}", "maintain.flush_every is -1s"},
		{"a list", "maintain: [seal]", "maintain is false, true, or a mapping"},
		{"a word", "maintain: sometimes", "maintain is false, true, or a mapping"},
		{"negative open logs", "maintain: {max_open_logs: -1}", "maintain.max_open_logs is -1; give a positive number of logs"},
		{"open logs not a number", "maintain: {max_open_logs: many}", "maintain.max_open_logs: give a whole number of logs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml+"\nstreams: [{name: a}]\n"), "")
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestTierRetentionBecomesTheChildrensOverrides(t *testing.T) {
	tiers := Tiers{TargetFileBytes: 1 << 20, StagingRetention: time.Hour, StagingMaxBytes: 4096, DeleteGrace: 2 * time.Minute}
	// Retention and grace reach the children; sizes and unset settings do not.
	want := logstore.Override{StagingRetention: time.Hour, StagingMaxBytes: 4096, DeleteGrace: 2 * time.Minute}
	if got := tiers.MaintainOverrides(); !reflect.DeepEqual(got, want) {
		t.Errorf("overrides %+v, want %+v", got, want)
	}
}

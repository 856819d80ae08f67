package broker

import (
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/streamcast/streamcast/pkg/logstore"
	"github.com/streamcast/streamcast/pkg/logstore/maintain"
)

func TestMaintainSectionSaysWhichRolesRun(t *testing.T) {
	all := []logstore.Role{logstore.RoleSeal, logstore.RoleCompact, logstore.RolePublish, logstore.RoleClean, logstore.RoleCleanPublished}
	cases := []struct {
		name, yaml string
		roles      []logstore.Role
		flush      time.Duration
	}{
		{"absent: every role", "", all, DefaultFlushEvery},
		{"true: every role", "maintain: true", all, DefaultFlushEvery},
		{"null: every role", "maintain:", all, DefaultFlushEvery},
		{"false: none", "maintain: false", nil, DefaultFlushEvery},
		{"0 and null turn roles off", "maintain: {compact_every: 0, clean_published_every: null, flush_every: 1s}",
			[]logstore.Role{logstore.RoleSeal, logstore.RolePublish, logstore.RoleClean}, time.Second},
		{"intervals are kept", "maintain: {seal_every: 1s, flush_every: 0}", all, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tc.yaml+"\nstreams: [{name: a}]\n"), "")
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
	cfg, _ := ParseConfig([]byte("maintain: {seal_every: 1s}\nstreams: [{name: a}]"), "")
	if r := cfg.Maintain.Roles(); r[0].Every != time.Second || r[1].Every != DefaultCompactEvery {
		t.Fatalf("intervals %+v: a key given replaces its default only", r)
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
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tc.yaml+"\nstreams: [{name: a}]\n"), "")
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestNewRefusesChildrenWithoutAnExecutable(t *testing.T) {
	cfg := testConfig(t)
	cfg.Maintain = DefaultMaintain()
	if _, err := New(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "Options.Executable") || !strings.Contains(err.Error(), "maintain: false") {
		t.Fatalf("got %v", err)
	}
	cfg.Streams = cfg.Streams[1:] // live-only streams: nothing to maintain
	if _, err := New(cfg, Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestTierRetentionReachesTheMaintainChildren(t *testing.T) {
	tiers := TierConfig{TargetFileBytes: 1 << 20, StagingRetention: time.Hour, StagingMaxBytes: 4096, DeleteGrace: 2 * time.Minute}
	sup := newSupervisor("/bin/streamcast", "", []MaintainRole{{logstore.RoleClean, time.Minute}}, []string{"/data/t/t"}, 30*time.Second, time.Second, log.New(io.Discard))
	sup.overrides = tiers.maintainOverrides()
	args := sup.children[0].args()
	// The root command's flags come first; the role's are maintain's.
	i := slices.Index(args, "--role")
	if args[0] != "maintain" || i < 0 {
		t.Fatalf("maintain args %q", args)
	}
	got, err := maintain.ParseArgs(args[i:])
	if err != nil {
		t.Fatalf("maintain args %q: %v", args, err)
	}
	want := maintain.Args{
		Role: logstore.RoleClean, Every: time.Minute, FlushEvery: 30 * time.Second, Logs: []string{"/data/t/t"}, ReadyFD: readyFD,
		// Retention and grace reach the child; sizes and unset settings do not.
		Override: logstore.Config{StagingRetention: time.Hour, StagingMaxBytes: 4096, DeleteGrace: 2 * time.Minute},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("maintain args %q read back as %+v, want %+v", args, got, want)
	}
}

package logstore

import (
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestArgsReadBackAsRendered(t *testing.T) {
	for _, a := range []MaintainArgs{
		{Role: RoleSeal, Every: 250 * time.Millisecond, FlushEvery: time.Minute, Logs: []string{"/d/trades/trades"}, ReadyFD: 3},
		{Role: RoleCompact, Every: time.Second, FlushEvery: 0, Logs: []string{"a", "b", "c with space", "-dash"}},
		{Role: RolePublish, Every: time.Hour, FlushEvery: 90 * time.Second, Logs: []string{"x"}, ReadyFD: 7,
			Override: Override{S3Endpoint: "http://127.0.0.1:9000", S3Region: "eu-west-1", S3PathStyle: true}},
		{Role: RoleClean, Every: 10 * time.Second, FlushEvery: time.Minute, Logs: []string{"x"},
			Override: Override{StagingRetention: 10 * time.Minute, StagingMaxBytes: 1 << 40, LocalDeleteGrace: time.Nanosecond}},
		{Role: RoleCleanPublished, Every: time.Second, FlushEvery: time.Minute, Logs: []string{"x", "y"},
			Override: Override{PublishedSnapshotRetention: 36 * time.Hour, DeleteGrace: 1500 * time.Millisecond}},
		{Role: RoleRetain, Every: time.Hour, FlushEvery: time.Minute, Logs: []string{"x"},
			Override: Override{RetentionGrace: 90 * time.Minute}},
		{Role: RoleClean, Every: time.Second, FlushEvery: time.Minute, Logs: []string{"x"}, CacheLogs: []string{"relay/a", "relay/b"}},
		{Role: RoleSeal, Every: time.Second, FlushEvery: time.Minute, CacheLogs: []string{"relay/a"}},
	} {
		got, err := ParseMaintainArgs(a.Args())
		if err != nil {
			t.Errorf("%q: %v", a.Args(), err)
			continue
		}
		if !reflect.DeepEqual(got, a) {
			t.Errorf("rendered %q, read back %+v, want %+v", a.Args(), got, a)
		}
	}
}

// TestArgsFlagsCoverEveryRenderedFlag: every flag MaintainArgs writes is one
// Flags defines, so a command line built on Flags reads what serve writes.
func TestArgsFlagsCoverEveryRenderedFlag(t *testing.T) {
	a := MaintainArgs{Role: RoleClean, Every: time.Second, Logs: []string{"x"}, CacheLogs: []string{"y"}, ReadyFD: 3, Override: Override{
		StagingRetention: 1, StagingMaxBytes: 1, PublishedSnapshotRetention: 1, DeleteGrace: 1, LocalDeleteGrace: 1, RetentionGrace: 1,
		S3Endpoint: "e", S3Region: "r", S3PathStyle: true,
	}}
	var b MaintainArgs
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	b.Flags(fs)
	for _, arg := range a.Args() {
		if name, ok := strings.CutPrefix(arg, "--"); ok && fs.Lookup(name) == nil {
			t.Errorf("MaintainArgs writes --%s, which Flags does not define", name)
		}
	}
}

func TestParseArgsRefusesWhatMaintainRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"--every", "1s", "--log", "x"},
		{"--role", "seal", "--every", "1s"},
		{"--role", "frobnicate", "--log", "x"},
		{"--role", "seal", "--every", "0s", "--log", "x"},
		{"--role", "seal", "--flush-every", "-1s", "--log", "x"},
		{"--role", "clean", "--staging-retention", "-1s", "--log", "x"},
		{"--role", "clean", "--staging-max-bytes", "lots", "--log", "x"},
		{"--role", "clean", "--ready-fd", "1", "--log", "x"},
		{"--role", "clean", "--log", "x", "stray"},
		{"--role", "clean", "--no-such-flag", "--log", "x"},
		// A cache log is never published, nor retained by a stream's window.
		{"--role", "publish", "--log", "x", "--cache-log", "y"},
		{"--role", "clean-published", "--cache-log", "y"},
		{"--role", "retain", "--cache-log", "y"},
	} {
		if a, err := ParseMaintainArgs(args); err == nil {
			t.Errorf("%q parsed as %+v", args, a)
		}
	}
	a, err := ParseMaintainArgs([]string{"--role=seal", "-log", "x"})
	if err != nil || a.Every != DefaultEvery || a.FlushEvery != DefaultFlushEvery {
		t.Errorf("defaults: %+v, %v", a, err)
	}
}

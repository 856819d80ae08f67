package logstore

import (
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRoleArgsReadBackAsRendered(t *testing.T) {
	for _, a := range []RoleArgs{
		{Role: RoleSeal, Every: 250 * time.Millisecond, FlushEvery: time.Minute, Logs: []string{"/d/trades/trades"}, ReadyFD: 3},
		{Role: RoleCompact, Every: time.Second, FlushEvery: 0, Logs: []string{"a", "b", "c with space", "-dash"}},
		{Role: RolePublish, Every: time.Hour, FlushEvery: 90 * time.Second, Logs: []string{"x"}, ReadyFD: 7,
			Override: Config{S3: S3Config{Endpoint: "http://127.0.0.1:9000", Region: "eu-west-1", PathStyle: true}}},
		{Role: RoleClean, Every: 10 * time.Second, FlushEvery: time.Minute, Logs: []string{"x"},
			Override: Config{StagingRetention: 10 * time.Minute, StagingMaxBytes: 1 << 40, LocalDeleteGrace: time.Nanosecond}},
		{Role: RoleCleanPublished, Every: time.Second, FlushEvery: time.Minute, Logs: []string{"x", "y"},
			Override: Config{PublishedSnapshotRetention: 36 * time.Hour, DeleteGrace: 1500 * time.Millisecond}},
	} {
		got, err := ParseRoleArgs(a.Args())
		if err != nil {
			t.Errorf("%q: %v", a.Args(), err)
			continue
		}
		if !reflect.DeepEqual(got, a) {
			t.Errorf("rendered %q, read back %+v, want %+v", a.Args(), got, a)
		}
	}
}

// TestRoleArgsFlagsCoverEveryRenderedFlag: every flag Args writes is one
// Flags defines, so a command line built on Flags reads what serve writes.
func TestRoleArgsFlagsCoverEveryRenderedFlag(t *testing.T) {
	a := RoleArgs{Role: RoleClean, Every: time.Second, Logs: []string{"x"}, ReadyFD: 3, Override: Config{
		StagingRetention: 1, StagingMaxBytes: 1, PublishedSnapshotRetention: 1, DeleteGrace: 1, LocalDeleteGrace: 1,
		S3: S3Config{Endpoint: "e", Region: "r", PathStyle: true},
	}}
	var b RoleArgs
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	b.Flags(fs)
	for _, arg := range a.Args() {
		if name, ok := strings.CutPrefix(arg, "--"); ok && fs.Lookup(name) == nil {
			t.Errorf("Args writes --%s, which Flags does not define", name)
		}
	}
}

func TestParseRoleArgsRefusesWhatMaintainRefuses(t *testing.T) {
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
	} {
		if a, err := ParseRoleArgs(args); err == nil {
			t.Errorf("%q parsed as %+v", args, a)
		}
	}
	a, err := ParseRoleArgs([]string{"--role=seal", "-log", "x"})
	if err != nil || a.Every != DefaultRoleEvery || a.FlushEvery != DefaultRoleFlushEvery {
		t.Errorf("defaults: %+v, %v", a, err)
	}
}

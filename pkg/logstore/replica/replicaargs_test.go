package replica_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore/replica"
	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
)

// TestArgsRoundTrip: what serve renders, replicate reads back unchanged.
func TestArgsRoundTrip(t *testing.T) {
	for _, a := range []replica.Args{
		{Logs: []string{"data/s/s"}, SyncInterval: time.Second, SnapshotInterval: time.Hour, SnapshotRetention: 24 * time.Hour},
		{Logs: []string{"a b/s", "c"}, SyncInterval: 250 * time.Millisecond, SnapshotInterval: time.Minute, SnapshotRetention: time.Minute, ReadyFD: 3},
		{Logs: []string{"s"}, SyncInterval: time.Second, SnapshotInterval: time.Hour, SnapshotRetention: time.Hour, Destination: "/backup/replica"},
		{Logs: []string{"s"}, SyncInterval: time.Second, SnapshotInterval: time.Hour, SnapshotRetention: time.Hour, Destination: "s3://b/p",
			S3: warehouse.S3{Endpoint: "http://127.0.0.1:9000", Region: "eu", PathStyle: true}},
	} {
		got, err := replica.ParseArgs(a.Args())
		if err != nil {
			t.Fatalf("ParseArgs(%q): %v", a.Args(), err)
		}
		if !reflect.DeepEqual(got, a) {
			t.Fatalf("ParseArgs(%q) = %+v, want %+v", a.Args(), got, a)
		}
	}
}

// TestArgsRefusals: each bad command line names the flag to fix.
func TestArgsRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--log"},
		{[]string{"--log", "x", "--sync-interval", "0s"}, "--sync-interval"},
		{[]string{"--log", "x", "--snapshot-interval", "2h", "--snapshot-retention", "1h"}, "--snapshot-retention"},
		{[]string{"--log", "x", "extra"}, "no arguments"},
		{[]string{"--log", ""}, "log directory"},
		{[]string{"--log", "x", "--destination", "ftp://host/x"}, "--destination"},
		{[]string{"--log", "x", "--destination", "s3://key:secret@b/p"}, "credentials"},
		{[]string{"--log", "x", "--destination", "/backup", "--s3-region", "eu"}, "s3:// destination"},
	} {
		_, err := replica.ParseArgs(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseArgs(%q) = %v, want an error naming %q", c.args, err, c.want)
		}
	}
}

// FuzzParseArgs: any command line parses or is refused, never panics, and
// what parses renders back to itself.
func FuzzParseArgs(f *testing.F) {
	f.Add("--log\x00a\x00--sync-interval\x001s")
	f.Add("--snapshot-interval=1h\x00--snapshot-retention=2h\x00--log=x\x00--ready-fd=3")
	f.Add("--log\x00")
	f.Fuzz(func(t *testing.T, line string) {
		a, err := replica.ParseArgs(strings.Split(line, "\x00"))
		if err != nil {
			return
		}
		b, err := replica.ParseArgs(a.Args())
		if err != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("%+v renders as %q, which reads back as %+v (%v)", a, a.Args(), b, err)
		}
	})
}

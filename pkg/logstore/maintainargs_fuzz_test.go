package logstore

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzParseArgs feeds ParseMaintainArgs arbitrary command lines (arguments split on
// NUL): it never panics, and a line it accepts renders (MaintainArgs) to a line that
// parses back to the same MaintainArgs, the round trip serve and maintain rely on.
func FuzzParseArgs(f *testing.F) {
	for _, seed := range []string{
		"--role\x00seal\x00--every\x001s\x00--log\x00/d/t/t",
		"--role\x00publish\x00--every\x0010s\x00--flush-every\x000\x00--log\x00a\x00--log\x00b\x00--s3-endpoint\x00http://127.0.0.1:9000\x00--s3-path-style",
		"--role\x00clean\x00--every\x001m\x00--log\x00x\x00--staging-max-bytes\x004GiB\x00--local-delete-grace\x001ns",
		"--role\x00nope\x00--log\x00x",
		"--every\x00-1s",
		"--ready-fd\x00-3\x00--role\x00seal\x00--log\x00x",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var args []string
		if line != "" {
			args = strings.Split(line, "\x00")
		}
		a, err := ParseMaintainArgs(args)
		if err != nil {
			return
		}
		back, err := ParseMaintainArgs(a.Args())
		if err != nil {
			t.Fatalf("%q parsed to %+v, whose rendering %q does not parse: %v", args, a, a.Args(), err)
		}
		if !reflect.DeepEqual(back, a) {
			t.Fatalf("%q parsed to %+v, which renders %q and reads back as %+v", args, a, a.Args(), back)
		}
	})
}

package cmd

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestResolveBuildPrefersLdflagsThenBuildInfo(t *testing.T) {
	vcs := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/streamcast/streamcast", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc123"},
			{Key: "vcs.time", Value: "2026-02-03T04:05:06Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	tests := []struct {
		name                  string
		version, commit, date string
		bi                    *debug.BuildInfo
		want                  buildInfo
	}{
		{
			name:    "goreleaser stamped everything",
			version: "1.2.3", commit: "fff", date: "2026-01-01T00:00:00Z", bi: vcs,
			want: buildInfo{Version: "1.2.3", Commit: "fff", Date: "2026-01-01T00:00:00Z", Go: "go1.99.1"},
		},
		{
			name: "go build in a modified checkout",
			bi:   vcs,
			want: buildInfo{Version: "v0.3.0", Commit: "abc123-dirty", Date: "2026-02-03T04:05:06Z", Go: "go1.99.1"},
		},
		{
			name: "go install module@version, no vcs",
			bi:   &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "v0.4.0"}},
			want: buildInfo{Version: "v0.4.0", Commit: "unknown", Date: "unknown", Go: "go1.99.1"},
		},
		{
			name: "no build info at all",
			want: buildInfo{Version: "(devel)", Commit: "unknown", Date: "unknown", Go: runtime.Version()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resolveBuild(tt.version, tt.commit, tt.date, tt.bi)
			tt.want.Platform = runtime.GOOS + "/" + runtime.GOARCH
			if got != tt.want {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

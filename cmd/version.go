package cmd

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set at link time by goreleaser (goreleaser.yaml):
//
//	-X github.com/streamcast/streamcast/cmd.version=1.2.3
//	-X github.com/streamcast/streamcast/cmd.commit=<sha>
//	-X github.com/streamcast/streamcast/cmd.date=<RFC 3339>
//
// These are the only package-level variables in cmd. Empty means unset;
// buildInfo then falls back to what the Go toolchain recorded.
var (
	version string
	commit  string
	date    string
)

// buildInfo describes the running binary.
type buildInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Date     string `json:"date"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// currentBuild resolves the build description from the ldflags variables,
// falling back to debug.ReadBuildInfo: the module version (set by
// `go install …@vX`, or derived from a VCS tag by `go build`), vcs.revision
// and vcs.time (recorded by `go build` in a checkout).
func currentBuild() buildInfo {
	bi, _ := debug.ReadBuildInfo()
	return resolveBuild(version, commit, date, bi)
}

func resolveBuild(version, commit, date string, bi *debug.BuildInfo) buildInfo {
	b := buildInfo{
		Version:  version,
		Commit:   commit,
		Date:     date,
		Go:       runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi != nil {
		if b.Version == "" && bi.Main.Version != "" {
			b.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			b.Go = bi.GoVersion
		}
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.time":
				if b.Date == "" {
					b.Date = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && commit == "" && b.Commit != "" {
			b.Commit += "-dirty"
		}
	}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Date == "" {
		b.Date = "unknown"
	}
	return b
}

func newVersionCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version",
		Long: `Print streamcast's version, the commit it was built from, the build date,
and the Go version and platform, one "key: value" per line, or as one JSON
object with --json.

Release builds carry the values goreleaser stamped in; other builds report
what the Go toolchain recorded ("(devel)" and "unknown" when it recorded
nothing).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := currentBuild()
			if asJSON {
				out, err := json.Marshal(b)
				if err != nil {
					return fmt.Errorf("encode version: %w", err)
				}
				_, err = fmt.Fprintf(a.stdout, "%s\n", out)
				return err
			}
			_, err := fmt.Fprintf(a.stdout, "version: %s\ncommit: %s\ndate: %s\ngo: %s\nplatform: %s\n",
				b.Version, b.Commit, b.Date, b.Go, b.Platform)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// Package cmd is streamcast's command line: the cobra tree, its flags, the
// logger and the output. The configuration is pkg/meta/config's: cmd marks
// the flags that set config keys (config.MarkFlag) and calls config.Resolve.
//
// It is deliberately thin. A command parses its flags and config, calls into
// pkg/..., and prints what comes back; the work itself lives in pkg/, and
// cmd must never hold logic a library caller would need. Nothing imports
// cmd but main and internal/gendocs, and the only package-level state is
// the ldflags build variables in version.go: the command tree is built afresh by
// NewRootCommand for every run, so tests and the doc generator get their own.
//
// Exit codes: 0 success, 1 failure, 2 usage (an unknown command or flag, a
// bad flag value, the wrong number of arguments).
package cmd

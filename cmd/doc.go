// Package cmd is streamcast's command line: the cobra tree, configuration
// loading (file, STREAMCAST_* environment, flags) and the logger.
//
// It is deliberately thin. A command parses its flags and config, calls into
// pkg/..., and prints what comes back; the work itself lives in pkg/. Nothing
// imports cmd, and the only package-level state is the ldflags build
// variables in version.go: the command tree is built afresh by
// NewRootCommand for every run, so tests and the doc generator get their own.
//
// Exit codes: 0 success, 1 failure, 2 usage (an unknown command or flag, a
// bad flag value, the wrong number of arguments).
package cmd

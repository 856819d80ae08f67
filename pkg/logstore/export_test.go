package logstore

import (
	"context"
	"time"

	"github.com/charmbracelet/log"
)

// RoleRun is how this package's tests ask for a maintenance role to run
// over a log, as `streamcast maintain` runs it.
type RoleRun struct {
	Every, FlushEvery time.Duration
	// RepeatEvery is how often a repeating failure is logged again; the
	// tests that count failed passes make it short.
	RepeatEvery time.Duration
	Logger      *log.Logger
	Ready       func()
}

// RunRole runs a maintenance role (by name) over dirs until ctx ends. The
// runner lives in pkg/logstore/maintain, above this package, which this
// package's own tests cannot import; its external tests hand it in here
// (roles_ext_test.go) before any test runs, in a helper child process too.
var RunRole func(ctx context.Context, role string, dirs []string, o RoleRun) error

// RoleNames are the roles RunRole runs, in serve's order; set beside it.
var RoleNames []string

// setOverride applies policy overrides to an open handle, as WithOverride
// does at open, for tests that change them between steps.
func (l *Log) setOverride(o Config) {
	l.polMu.Lock()
	l.pol = l.cfg.override(o)
	l.polMu.Unlock()
}

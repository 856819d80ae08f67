//go:build !unix

package testscript_test

import "github.com/rogpeppe/go-internal/testscript"

// platformCmds is empty where serve has no SIGHUP; reload.txtar skips there.
func platformCmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return nil
}

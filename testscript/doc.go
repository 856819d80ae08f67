// Package testscript holds streamcast's command-line scripts (*.txtar) and
// the test that runs them (go test ./testscript/). Each script drives the
// real binary the way a user would, so it doubles as documentation of the
// commands; the test binary stands in for `streamcast`, and custom commands
// such as exitcode are described in testscript_test.go.
//
// Update a script's expected output after a deliberate change with
// go test ./testscript/ -update. The package has no code outside its tests,
// and nothing imports it.
package testscript

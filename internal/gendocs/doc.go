// Command gendocs writes streamcast's shell completions (completions/) and man
// pages (man/, one per command) from the cobra tree. It runs through
// `go generate ./...` (the directive is in main.go) from the repository root,
// and its test fails when the committed copies differ from what it would
// write now.
//
// Both directories belong to it entirely: each run empties them first, so a
// removed command loses its page. The output is byte-stable: man pages carry
// a fixed date (manDate), not the clock, and no flag default may depend on
// the machine generating them.
package main

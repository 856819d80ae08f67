// Command streamcast is a durable WebSocket stream broker: one binary that
// serves streams, maintains their logs and reads their history. The commands
// live in package cmd; the storage, protocol and server in pkg/. See README.md
// and `streamcast --help`. main.go holds nothing but the call to
// cmd.Execute, and must never hold more; imports_test.go here checks that
// every import points down the layers of docs/design.md §3.
//
// The shell completions (completions/) and man pages (man/) are generated
// from the command tree by the directive below and committed; the test in
// internal/gendocs fails when they are stale.
package main

//go:generate go run ./internal/gendocs

// Package brokertest runs a real broker in the test's process for the
// tests of the packages that talk to it (the Go client, the shell tools,
// the outbox and inbox, the load generator, the console, the control API),
// on 127.0.0.1, stopped when the test ends; Executable gives a server the
// streamcast command built once per test binary, so its maintenance
// children are real processes.
//
// It is imported by tests only, never by the product, and never by
// pkg/broker's own tests (it imports pkg/broker). It is its own package,
// beneath internal/testkit, because testkit imports nothing of the module so
// that every package's tests may use it, and this one must import the
// broker.
package brokertest

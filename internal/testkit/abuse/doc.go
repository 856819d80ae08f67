// Package abuse holds the abuse suite: attacks on a real
// `streamcast serve` process over loopback — stalled subscribers, connection
// churn, half-open TCP connections, a full disk, SIGSTOP/SIGCONT of the
// server and SIGKILL of its maintenance children, each under load. Every
// test asserts that the server's RSS and file descriptors stay bounded and
// that no acknowledged row is lost (the acks are compared with a replay).
//
// The tests run the built binary rather than an in-process server: RSS and
// descriptors are then the server's own (/proc/<pid>), not the test's
// clients' as well, the maintenance children are real processes to kill,
// and signals stop the whole server. The ping flood lives beside the code it
// attacks, in pkg/broker (TestAPingFloodFromAPeerThatNeverReadsIsClosed).
//
// Each test is bounded in count and time; `go test -short` runs small
// counts, and STREAMCAST_SOAK=full (testkit.SoakCount) the full ones. The
// package has no code outside its tests and nothing imports it.
package abuse

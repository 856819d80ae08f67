// Package testkit holds the test harnesses the module's tests share, each
// of them real parts rather than mocks: a real S3 server (versitygw on
// 127.0.0.1, StartS3), a throwaway PostgreSQL server (StartPostgres), a
// certificate authority minted in memory (NewCA, WriteTLSFiles), the
// streamcast command built once per test binary for the tests that run it
// as a process (Streamcast), a scripted WebSocket peer and byte-level
// client frames for protocol-edge tests (FakeServer, ClientFrame, MemPeer,
// CountingDialer), and how hard the long crash and soak loops push
// (SoakCount: a few rounds locally, full counts in CI with
// STREAMCAST_SOAK=full). A test that cannot get a server it needs fails
// rather than skips, except PostgreSQL where its binaries are absent and
// STREAMCAST_REQUIRE_POSTGRES is unset.
//
// It is imported only by tests (and by brokertest, beneath it), never by the
// product, and it imports nothing of the module, so any package's tests
// may use it, pkg/broker's own included. brokertest, which runs a real
// broker in the test's process, is its own package because it imports
// pkg/broker, which testkit must not. Beneath it sit two suites with no
// code outside their tests: abuse (attacks on a real serve) and idlecost
// (what idle streams cost).
package testkit

// Package relay follows a stream of another server for a relay stream
// (upstream: in its config). A Follower subscribes there from the relay's
// own end (a relay with an empty log from the upstream's earliest
// replayable offset, Earliest), checks every greeting against the identity
// its log holds and the schema it serves (docs/design.md I8), checks each
// frame is in the form this server writes, and hands what arrives to its
// Target, which commits it at the same offsets, with the same stamps and
// row bytes, and fans it out. A dropped session is retried with backoff (a
// 4429 at once); too_old, a gap or another stream behind the URL stops it
// for good.
//
// It never assigns an offset: the upstream is the one writer of the stream
// (I7 across machines), and a row that would leave a gap is never handed
// on (I1, I6).
//
// It builds the frames it hands on with pkg/wire's frame builder, the
// broker's own, and sits below pkg/broker, which implements Target over
// its stream's log and fan-out; it imports no package of broker's tree.
// Start runs one goroutine, which Stop cancels and waits for. It is its own
// package because following an upstream is a client's loop with a small
// API (Follower, Target) that reads alone, and knows nothing of the
// server's connections.
package relay

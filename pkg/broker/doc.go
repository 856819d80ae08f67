// Package broker is streamcast's server: it opens each configured stream's
// log, accepts publishers and subscribers over WebSocket (protocol 4, see
// pkg/wire) and publishers over plain HTTP (POST /<stream>, one batch per
// request through the same committer: httppublish.go), commits rows and
// fans them out, and serves /stats, /health and /metrics. A subscriber may
// also read a stream as Server-Sent Events (sse.go): the same connection
// type, queue, bound and replay, its frames re-framed as events.
//
// It carries the delivery invariants. A stream's committer appends a group of
// rows in one transaction (I1), and only then, under the stream's fan-out
// lock, advances the frontier and queues each row's one pre-encoded frame to
// every subscriber before acknowledging the publishers (I3: commit, fan out,
// ack; I4: one encoding, shared bytes, the same function for replay). Adding a
// subscriber and reading the frontier happen under the same lock (I2), so a
// replay of [offset, frontier) and the live queue partition the stream
// exactly. A subscriber's queue (frameQueue) is bounded by max_backlog
// frames and offering to it never blocks; on overflow it gets a contiguous
// prefix and close 4429 with the offset to resume at (I5), and the memory of
// queues let go goes back to the OS (reclaim.go). Publishers wait for room
// in a durable stream's bounded inbox (max_inbound rows), never a
// subscriber. Requests that cannot be served exactly are refused with a
// close code and the numbers (I6): where a subscription starts, or why it
// is refused (not durable, empty, ahead, evicted, too old), is replay.go's
// decision.
//
// Decisions the protocol leaves open: offset=0 on a log that never held a row
// is served (every row from the first); 4416 "empty" is sent only when a log
// held rows and now holds none, so "everything from the earliest" cannot mean
// nothing silently. A durable stream needs a non-empty name (it names a
// directory). publisher= is served on streams declared exactly_once (which
// must be durable: the marks live in the log) and refused with 4412 elsewhere;
// anonymous publishers still publish at least once on an exactly-once stream.
// marks.go judges those frames against a publisher's mark, and says how. A
// publisher's frames are decoded and validated on its reader goroutine
// (pubDecoder), never on the committer. Subscribers' frames are written by
// the server itself, straight to the socket with writev (over TLS, copied
// into one buffer per write instead, since TLS seals each write on its own);
// gorilla/websocket does the handshake and reads, and a peerFollower sees
// the peer's frame headers first, for what gorilla's API hides.
//
// Run also supervises serve's maintenance children (package supervise): one
// `streamcast maintain --role R` process per role the maintain: section
// runs, over every durable log. Streams are served only once every child
// has reported ready; a child that exits is restarted with backoff; a
// SIGKILL of the server takes the children with it (Linux); and a graceful
// stop flushes seal, then publish, before stopping the rest, so every
// acknowledged row ends up sealed and published.
//
// Streams come and go while the server runs: they live in a registry by
// name (registry.go), and Reload (reload.go) starts the streams a new config
// adds and stops those it drops, the others serving on; the control API
// (package control) drives the same steps through the Runtime this package
// gives it. Stopping a stream fences its publishers, answers what they
// queued and closes them with 1001, drains its committer, seals and
// publishes its log, closes its subscribers with 1001 and closes the log,
// releasing its lock; a stream's attached connections and its stop and fence
// states are life.go's. Server shutdown runs the same steps over every
// stream at once (teardown). A durable stream's log is opened under its
// metadata (streamlog.go: never minted afresh over existing history, I8); a
// relay stream's log is a cache of its upstream's (cache.go, package relay).
//
// Connections come in at one place (entry.go): the listener (listener.go:
// TLS when the tls: section is set, with the certificate reloaded on SIGHUP
// and on a change on disk, certs.go; connections bounded in total and per
// address, with a reserve of descriptors for the logs), then a chain of
// HTTP middleware (the allowed_origins check, authentication and grants when
// auth: is set (gate.go over package auth), then Options.Middleware), then
// the routes: /stats (its document is Stats, which the load generator
// decodes too), /health, /metrics and /<stream>. PrincipalFromTLS names a
// mutual-TLS client. /metrics (metrics.go, package metrics) reads, at
// scrape time, counters the hot path keeps with atomic adds per group or
// per write, never a lock: a server with metrics disabled reads no clock
// for them either.
//
// Its sub-packages are the parts with a small API of their own that reads
// alone, each saying why in its doc: auth, console, control, metrics, relay
// and supervise. None imports broker; broker imports them all.
//
// The package never validates rows on the committer (publishers' goroutines
// do), never lets a subscriber's speed reach a publisher or another
// subscriber, and never appends to a log it does not hold the lock of (I7).
package broker

// Package streamlog opens a durable stream's current log the way serve
// must: it resolves the stream's metadata (meta.Resolve), creates the
// first log and mints the stream's identity only when nothing of the
// stream exists anywhere, and otherwise opens the log the metadata names,
// never creating it afresh (docs/design.md I8). Before the log is handed
// over it checks that the log was created with the configured schema, that
// the config agrees with what the log stores (published prefix, S3), and
// the stream's history_guard. It also opens and creates a relay stream's
// cache log, which has no stream metadata of its own, and keeps the
// upstream stream_id recorded beside it (OpenCache, RecordUpstream).
//
// It sits above pkg/broker/config, whose stream and server settings it
// reads, and below pkg/broker; it imports no other sub-package of broker.
// It owns no goroutine and keeps nothing: the log it returns is the
// caller's to close, and on an error it leaves no log open. It never
// accepts a connection, commits a row or finishes an interrupted migrate or
// retire (the command that recorded the intent does).
package streamlog

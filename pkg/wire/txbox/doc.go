// Package txbox is a transactional outbox and inbox over database/sql: the
// row an application sends, or the row it receives, lives in the
// application's own transaction, so a crash anywhere neither loses it nor
// sends or applies it twice.
//
// The outbox numbers rows gaplessly inside the caller's transaction and a
// sender goroutine ships committed rows over an exactly-once publisher
// (pkg/wire), reconciling with the publisher's mark in the greeting. The
// inbox lands received rows with their offsets and hands each one out in a
// transaction that already holds its delete. Both run on SQLite (modernc)
// and PostgreSQL (pgx stdlib); DDL gives the tables for a role that may not
// create them, and ParseDSN reads the database URL the outbox and inbox
// commands take (a refusal never quotes what may be a password). The
// package builds on pkg/wire only and never imports the broker. It is its
// own package, above wire, because it is a client application's API of its
// own, with database drivers the wire client never needs.
//
// The inbox moves the subscriber's last received offset in the transaction
// that lands the rows, and binds the stream's identity at the first connect,
// checking it at every later one (I8 seen from a consumer): a recreated
// stream is refused, never read as a continuation. It never stores pause
// state: the receive window (window.go) decides it from counts.
package txbox

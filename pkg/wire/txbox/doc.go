// Package txbox is the transactional outbox and inbox: exactly-once between
// a stream and the application's own database (SQLite through modernc, or
// PostgreSQL through pgx's database/sql driver).
//
// The inbox lands each received row in the streamcast_inbox table and moves
// the subscriber's last received offset in the same transaction, so a crash
// loses nothing and receives nothing twice; Next hands the application a
// row together with a transaction that already deletes it, so the row's
// work and its removal commit together. The stream's identity is bound at
// the first connect and checked at every later one (I8 seen from a
// consumer): a recreated stream is refused, never read as a continuation.
// The package never panics on rows or greetings from the network and never
// keeps pause state in the database: it is decided from counts (window.go).
package txbox

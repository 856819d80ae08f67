// Package logstore owns the storage of one log in three tiers: a SQLite
// buffer (buffer.db) of recently committed rows, Parquet files under files/
// with older ones, and an Apache Iceberg table (the published table) with
// the log's history for any engine to read; the records in buffer.db that
// say which tier holds which offsets; and scans of an offset range across
// all three, in offset order. docs/design.md §4 describes the layout, the
// published table, crash recovery and reads.
//
// It guarantees dense, ordered, never-reused offsets, committed in one
// transaction per batch (I1); its half of I3 (rows are fsynced before
// Append returns); rows read back byte-identical from any tier (I4); one
// appending process per log, through an exclusive lock file (I7, package
// filelock takes it); and that
// a log never publishes into a table another log created (I8). A log's
// life (a start offset, a fence, a retention floor; docs/design.md §4) is
// the same records, so no step can skip an offset or serve one twice.
//
// The maintenance steps that move rows between the tiers live in
// pkg/logstore/tier, above this package. They work through the record
// API of records.go: role locks (Acquire), the commit lock, one write
// transaction on buffer.db (Update), the published table handle and the
// test hooks. This package keeps what an Open must settle on its own:
// reading the buffer for a seal (ReadBuffered) and recovering a seal that
// crashed between its intent and its completion (RecoverSeals). A bulk
// load (tier.Ingest) takes the next offsets by IngestStart and AdvanceNext.
//
// CheckFooter and CheckRowOffsets are the one check every reader of a data
// file makes, here and in pkg/meta/history: the file holds exactly the
// offsets its record (buffer.db's, or the table's manifest) says, or the
// read is refused naming it (I6).
//
// ReadActivity (package activity) fingerprints a log's stored state
// without opening it, so the maintenance loop skips logs with no work.
//
// It never validates rows (callers hand it canonical bytes pkg/schema
// accepted), never finds a file by listing a directory, and knows nothing
// of the wire, subscribers or the server. It keeps no mutable state of its
// own and reads the time only through a handle's Clock, save for
// WithIdleClose's timer: when to let an idle connection go is a bound on
// descriptors, not part of a log's meaning, and runs on wall time.
package logstore

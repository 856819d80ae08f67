// Package logstore owns the storage of one log in three tiers: a SQLite
// buffer (buffer.db) of recently committed rows, Parquet files under files/
// with older ones, and an Apache Iceberg table (the published table) with
// the log's history for any engine to read; the maintenance steps that
// move rows between the tiers (Seal, Compact, Publish, Clean,
// CleanPublished); and scans of an offset range across all three, in
// offset order. docs/design.md §4 describes the layout, the published
// table, crash recovery and reads.
//
// It guarantees dense, ordered, never-reused offsets, committed in one
// transaction per batch (I1); its half of I3 (rows are fsynced before
// Append returns); rows read back byte-identical from any tier (I4); one
// appending process per log, through an exclusive lock file (I7); and that
// a log never publishes into a table another log created (I8). Every step
// records its intent before it creates a file, so a crash at any point is
// recovered by the next pass or open. A log's life (a start offset, a
// fence, publishing everything offline, a retention floor; docs/design.md
// §4) is the same records, so no step can skip an offset or serve one
// twice.
//
// It never validates rows (callers hand it canonical bytes pkg/schema
// accepted), never finds a file by listing a directory, and knows nothing
// of the wire, subscribers or the server. It keeps no mutable state of its
// own and reads the time only through a handle's Clock. Running the steps
// in a loop over many logs is pkg/logstore/maintain's job.
package logstore

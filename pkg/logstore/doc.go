// Package logstore owns the storage of one log in three tiers: a SQLite
// buffer (buffer.db) of recently committed rows, each commit group's rows
// packed in one blob; Parquet files under files/ with older ones, each
// recorded with its per-column statistics; and an Apache Iceberg table (the
// published table) with the log's history for any engine to read. It holds
// the records in buffer.db that say which tier holds which offsets, the
// answers read from those records alone (counts, summaries, holes, extent,
// status), scans of an offset range across all three tiers in offset order,
// and a log's Config, stored in buffer.db at Create with its defaults and
// the policy fields a maintenance process may override. docs/design.md §4
// describes the layout, the published table, crash recovery and reads.
//
// The maintenance steps that move rows between the tiers are methods of
// *Log: Seal, Compact, Publish, Clean, CleanPublished, DeleteBelow,
// PublishAll (the offline flush) and Ingest (a bulk load written straight
// to files with the log's next offsets). Each records its intent in
// buffer.db before it creates a file and completes in one transaction, so a
// crash at any point is undone or finished by the next pass (for seal, the
// next Open); each runs under its role's lock file, so one process runs it
// on a log at a time, and none deletes the only copy of a row. Maintain runs
// the roles over many logs in a loop, skipping a log whose stored state has
// not changed (ReadActivity fingerprints it without opening the log), and
// MaintainArgs is the `streamcast maintain` command line, which serve
// renders for its children and the command parses, from one definition.
//
// It guarantees dense, ordered, never-reused offsets, committed in one
// transaction per batch (I1); its half of I3 (rows are fsynced before
// Append returns); rows read back byte-identical from any tier (I4); one
// appending process per log, through an exclusive lock file (I7); and that
// a log never publishes into a table another log created (I8). CheckFooter
// and CheckRowOffsets are the one check every reader of a data file makes,
// here and in pkg/meta/history: the file holds exactly the offsets its
// record says, or the read is refused naming it (I6).
//
// buffer.db's schema and the statements against it belong to this package
// alone. It never validates rows (callers hand it canonical bytes
// pkg/schema accepted), never finds a file by listing a directory, and
// knows nothing of the wire, the server or a stream's metadata (the retain
// role's pass comes in as MaintainOptions.Retain). It keeps no mutable state
// of its own and reads the time only through a handle's Clock, save for
// WithIdleClose's timer: when to let an idle connection go is a bound on
// descriptors, not part of a log's meaning, and runs on wall time.
//
// Three seams stay packages of their own, each with a small API that reads
// alone: warehouse (the Iceberg table and its published location) and
// parquetfile (the file format) below it, and replica (WAL shipping with
// litestream) above it.
package logstore

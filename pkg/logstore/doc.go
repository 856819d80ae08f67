// Package logstore owns the storage of one log: a SQLite buffer (buffer.db)
// holding recently committed rows, and sealed Parquet files under files/
// holding older ones, with scans that read an offset range across both tiers
// in offset order.
//
// It guarantees ordered, dense, never-reused offsets committed in one
// transaction per batch (I1), durability before Append returns (I3), rows
// read back byte-identical to the canonical bytes appended, from either tier
// (I4), and a single appending process per log through an exclusive lock
// file (I7). It knows nothing of the wire protocol, subscribers or the
// server, and it never validates rows: callers hand it canonical bytes that
// pkg/schema has already accepted.
//
// # Layout
//
// A log directory holds:
//
//	buffer.db     SQLite (WAL, synchronous=FULL): rows, marks, file records, seal intents
//	lock          flock held by the one Writer; holds its pid
//	seal.lock     flock held by whichever process is sealing (maintain --role seal)
//	clean.lock    flock held by whichever process is evicting (maintain --role clean)
//	files/        sealed Parquet files, <start>-<end>-<token>.parquet, [start,end) offsets
//
// buffer.db stores each commit group as one SQLite row (the packed layout):
// its first offset, row count, streamcast_ts and the rows as uvarint
// length-prefixed canonical JSON. The next offset lives in the meta table,
// so emptying the buffer, a crash or a VACUUM never lowers it. Its other
// tables hold the exactly-once marks (upserted in the append transaction),
// the records of completed files (range, rows, sizes, column min/max) and
// the intents of seals in progress.
//
// Sealed files hold streamcast_offset and streamcast_ts (int64, required)
// and then the declared columns, zstd-compressed, in one row group, with the
// Arrow schema stored so every type reads back exactly. A stream without a
// schema (schema.Any) keeps each row's JSON text in one string column,
// streamcast_row.
//
// # Processes
//
// The Writer appends; Maintainer handles (the seal and clean roles) and the
// Writer itself may Seal and Evict, which write only bookkeeping rows;
// ReadOnly handles never write. Sealers exclude each other with seal.lock,
// cleaners with clean.lock, so two processes never race on one step; a
// process that finds the role lock taken skips the pass with ErrBusy.
// Maintenance writes are short transactions (an intent, a completion, an
// evict chunk of at most a few hundred groups), so an Append waits behind
// one for milliseconds at most, never for a whole seal or evict.
//
// # Sealing and recovery
//
// A seal cuts only at commit-group boundaries, so eviction deletes whole
// groups and a group is never split between a file and the buffer. Each seal
// records its intent (offset range and a file name with a fresh random
// token) before the file exists, writes and fsyncs the file and the
// directory, and then records the completion (range, rows, bytes, per-column
// min/max) while dropping the intent, in one transaction. An intent found
// without its completion, at open or at the next seal pass, is undone under
// seal.lock: its file is deleted and the range is sealed afresh under a new
// name. A completed file is never written twice, and a row is never in two
// files or in none.
//
// # Reads
//
// Scan and ScanArrow read completed files for the part of the range below
// the files' end and the buffer above it. The buffer is read in short
// chunks; when a chunk finds rows already evicted (a seal and an evict ran
// meanwhile in another process) the scan reloads the file records and reads
// those offsets from the new file, so concurrent maintenance neither doubles
// nor drops a row. A file that cannot be read, or whose contents disagree
// with its record, fails the scan with an error naming the file before any
// of its rows are served.
package logstore

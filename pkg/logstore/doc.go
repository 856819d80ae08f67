// Package logstore owns the storage of one log in three tiers: a SQLite
// buffer (buffer.db) holding recently committed rows, Parquet files under
// files/ holding older ones, and an Apache Iceberg table (the published
// table) holding the log's history for any engine to read; plus the
// maintenance steps that move rows between the tiers (seal, compact,
// publish, clean, clean-published) and scans that read an offset range
// across all three in offset order.
//
// It guarantees ordered, dense, never-reused offsets committed in one
// transaction per batch (I1), its half of I3 (durable before delivered:
// rows are fsynced before Append returns, so the server fans out and
// acknowledges only what a crash cannot take back; docs/design.md §2), rows
// read back byte-identical to the canonical bytes appended, from any tier
// (I4), a single appending process per log through an exclusive lock file
// (I7), and that a log never publishes into a table another log created
// (I8). It knows nothing of the wire protocol, subscribers or the server,
// and it never validates rows: callers hand it canonical bytes that
// pkg/schema has already accepted.
//
// # Layout
//
// A log directory <root>/<stream>/<log> holds:
//
//	buffer.db     SQLite (WAL, synchronous=FULL): rows, marks, and every record of the other tiers
//	lock          flock held by the one Writer; holds its pid
//	<role>.lock   flock held by whichever process runs that step (seal, compact, publish, clean, clean-published)
//	commit.lock   flock held around every commit to the published table
//	files/        local Parquet files, <start>-<end>-<token>.parquet, [start,end) offsets
//
// buffer.db stores each commit group as one SQLite row (the packed layout):
// its first offset, row count, streamcast_ts and the rows as uvarint
// length-prefixed canonical JSON. The next offset lives in the meta table,
// so emptying the buffer, a crash or a VACUUM never lowers it. Its other
// tables hold the exactly-once marks (upserted in the append transaction),
// the records of local files (files) and published ones (published), the
// intents of seals, merges and publish passes in progress, and the delete
// queue. Nothing is ever found by listing a directory: every file is
// recorded before it exists, and deleted only through the queue.
//
// Files hold streamcast_offset and streamcast_ts (int64, required) and then
// the declared columns, zstd-compressed, with the Arrow schema stored so
// every type reads back exactly, and with the published table's field ids.
// Each row group holds a contiguous offset range, its rows ordered by
// sort_by, then offset. A stream without a schema (schema.Any) keeps each
// row's JSON text in one string column, streamcast_row.
//
// # Configuration
//
// Config is stored in buffer.db at Create. The shape of the log (sort_by,
// the published prefix and S3 settings, the file targets) is fixed there;
// the retention and grace settings are defaults a maintenance process may
// override (RoleOptions.Override, the flags of `streamcast maintain`), and
// so may the S3 endpoint and region. S3 credentials are never configured:
// they come from the standard AWS environment or profile, in every process
// that reads or writes the table, and never reach buffer.db, the table's
// metadata or a log line.
//
// # The published table
//
// Each log is an Iceberg table (format 2, unpartitioned, sort order
// sort_by) at <prefix>/<stream>/<log>, made through iceberg-go's hadoop
// catalog with the prefix as warehouse, the stream as namespace and the log
// as table name: vN.metadata.json files and a version-hint.text, which
// Spark's hadoop catalog, DuckDB's iceberg_scan and iceberg-go read. The
// stream and log names are those the log stored at Create (Config.Stream,
// Config.Log), never read off the directory, so a moved log keeps its
// table; a log created before logs stored them takes them from its
// directory once, and its first writable open stores them. The prefix is
// what ParseLocation reads (an s3:// URL, a file:// URL or a directory);
// which prefix a log gets, and the default <root>/published, are
// pkg/meta's layout, stored with the log at Create.
// Its columns are the files' columns; its properties bound metadata growth
// (old metadata deleted after each commit, ten versions kept, manifests
// merged) and carry streamcast.log-id (the owning log), and
// streamcast.published-through and streamcast.pass, written by every
// publishing commit. The hadoop catalog's commit is a rename, which S3
// does not make atomic; that is safe here only because the commits to one
// table never overlap: publish and clean-published, the only processes
// that commit, hold commit.lock while they do (I7).
//
// # Moving rows between the tiers
//
// Seal cuts buffered rows into files at commit-group boundaries
// (TargetSealBytes of Arrow data each, or everything on a flush).
// Compact merges adjacent files by size class: fanout files of one class
// become one of the next, up to TargetFileBytes on disk, so a row is
// rewritten about log_fanout(target/seal size) times and few small files
// wait. Publish pushes files into the table, one commit per pass: finished
// files, or every file on a flush; a merged file that covers files the
// table already holds replaces them in the same commit (a swap), so the
// table always holds offsets [first, published_through] exactly once, and
// never a range twice or a file straddling its end. Clean evicts buffered
// rows that files hold, takes local files out once the table holds them
// and they are past StagingRetention (or the local files exceed
// StagingMaxBytes; never an unpublished file, which is the only copy) and
// deletes queued files after LocalDeleteGrace. Clean-published expires
// snapshots past PublishedSnapshotRetention and deletes the objects no kept
// snapshot references after DeleteGrace, each checked against the table's
// live metadata and buffer.db's records right before deletion.
//
// # Crashes
//
// Every step records its intent (range and a file name with a fresh random
// token) before it creates a file, and its completion after, in buffer.db;
// the next pass (or the next open, for seals) finishes or undoes what a
// crash left. A seal or merge interrupted before its completion has its
// file deleted and is redone under a new name. A publish pass interrupted
// between upload and commit has its uploads queued for deletion; one
// interrupted between commit and record is recorded: the commit carries the
// pass's token in the table's properties, so the next pass can tell which
// half happened. Clean-published queues what an expiry will orphan before
// it commits the expiry. A name is never reused, so a queued file never
// comes back to life.
//
// # Reads
//
// Scan and ScanArrow read [from, to) from local files where they hold it,
// published files below them, and the buffer above, each tier bounded by
// what buffer.db records for it, never by listing. The buffer is read in
// short chunks; when a chunk finds rows already evicted, or a file is gone
// (replaced by a merge, or taken out by clean), the scan reloads the
// records and reads those offsets from where they are now, so concurrent
// maintenance neither doubles nor drops a row. Published files are read by
// their recorded location, without loading the table's metadata. A file
// that cannot be read, or whose contents disagree with its record, fails
// the scan with an error naming the file before any of its rows are
// served; offsets below every tier are a *RangeError (evicted).
//
// # Flushing
//
// Without a flush, rows reach the table only in finished files. RunRole
// makes seal and publish flush once per FlushEvery, at wall-clock
// multiples of it so separate processes agree: seal cuts everything
// buffered, and publish pushes every file on each pass until the table
// holds what was committed at the boundary. The table then trails the
// writer by about FlushEvery plus a publish pass.
//
// # Lifecycle
//
// A log starts at Config.Start (a successor at its predecessor's end), is
// closed to writes for good by Fence, and published whole offline by
// PublishAll. SetFloor hides what retention cut off; DeleteBelow takes out
// whole files below the floor. CountRows counts from the tiers' records,
// never rows. docs/design.md §3.3 has the details.
//
// # Time and the command line
//
// A handle reads the time only through the Clock it was opened with
// (WithClock; RoleOptions.Clock for RunRole): every stamp it writes and
// every comparison with a retention or a grace. The package keeps no
// mutable state of its own; test hooks live on the handle. maintain.Args
// (the sub-package pkg/logstore/maintain) is the one definition of the
// maintain command line, rendered by the server for its children and
// parsed by the maintain command.
package logstore

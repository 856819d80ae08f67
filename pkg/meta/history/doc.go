// Package history reads a stream's whole history as one table: every log
// of the stream (the migrated ones included), from the published Iceberg
// tables and, where a fixed point asks for it, the unpublished tail from a
// running server. Columns are unioned by name across logs; a column a log
// lacks reads as null; streamcast_offset and streamcast_ts are ordinary
// columns.
//
// A Reader resolves the stream's metadata once, outside any cache, and pins
// every table's snapshot for its life, so one read sees one cut of the
// history. It refuses rather than answering short (I6, docs/design.md):
// a range no tier holds, rows below the retention floor, a metadata file
// whose stream_id differs from the one expected, a retired log whose
// table holds fewer rows than at retirement, and a published file that
// does not hold the offsets its manifest entry records (the check serve's
// replay makes, logstore.CheckFooter) are errors naming the numbers and
// the file.
//
// Bounds passed to Scan only skip logs, files and row groups whose
// statistics prove them empty; Scan never drops a row for failing a bound.
// Callers that filter rows (SQLite, the where= filter code) check every row
// they are given, so results never depend on what was skipped.
//
// On a Reader, Scan gives Arrow records (for SQL and exports), Rows gives
// each row's canonical JSON as the server sends it (I4), and Export writes
// a cut as Parquet, Arrow IPC, NDJSON or frames (`streamcast snapshot`).
// CatchUp reads what a server refused to replay (4416 too_old or evicted)
// from the published tables, with no socket open (`tail --catch-up`).
//
// It sits above pkg/meta, pkg/logstore and pkg/wire and below sqlview and
// cmd; it never writes: not the metadata, not a table, not a log. It is its
// own package because reading every log of a stream as one table (Reader)
// is an API that reads alone, and the part of pkg/meta that subscribes to
// a running server (for the live tail), which pkg/meta itself never does.
package history

// Package source reads a bulk load (Parquet, Arrow IPC file or stream,
// NDJSON, CSV with a header) and turns it into Arrow batches of a stream's
// declared columns, checked by the rules a published row meets: it is
// what `streamcast ingest` reads before any row takes an offset.
//
// It owns the type rules of a load. Parquet and Arrow columns are matched
// by name (any order; every required column present, an optional one
// absent loading as null, nothing undeclared, no streamcast_offset or
// streamcast_ts) and cast only where no value can
// change: int32 to int64, large_string to string and the like; a lossy
// cast (float to int, int64 to int32, timestamp to int) is refused naming
// the column and both types. NaN and ±Inf are refused, so are nulls where
// the schema allows none, naming the column and the row. NDJSON lines go
// through schema.Decode, the decoder publish and serve use, so an omitted
// nullable column is null. A CSV cell is read by its column's declared
// type, its row then checked by schema.Decode too (I6: refuse, never
// guess). A batch is handed over only when every row of it passed, so a
// refused batch never takes offsets.
//
// Why a package of its own, under pkg/schema: the rules are the schema's
// (schema.Decode and the Arrow types of Schema.Arrow), and they must hold
// before pkg/logstore sees a row, which never reads a foreign file. The
// format readers are many lines that neither schema (JSON ⇄ Arrow for
// rows it encoded itself) nor logstore (files it wrote itself) should
// carry. It imports schema and arrow-go only; logstore takes its batches
// through logstore.IngestSource (Log.Ingest) without importing it.
//
// Positions are the source's own: a file and its row (1-based; for NDJSON
// and CSV also the line), and the row ordinal across all inputs, which
// --skip-rows counts.
package source

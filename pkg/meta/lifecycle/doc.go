// Package lifecycle runs the offline steps of a stream's life that end a
// log: Migrate (seal and publish the current log, fence it, and continue
// the stream in a new log starting at exactly its end) and Retire (seal,
// publish and fence the current log, and record the stream's end). Both
// take the current log's writer lock (I7), which names the holder's pid
// when serve has it, so they run with the server stopped, or online
// through serve's own writer, which it lends them (Options.Current).
//
// Each records its intent in the stream's metadata (pkg/meta) before its
// first step, and each step is idempotent, so a run killed at any point
// is finished by the next run. They resolve the stream first (meta.Resolve)
// and never give a retired stream a successor log, even when its
// retirement was only recovered by adopting the published metadata (I8,
// docs/design.md §4.2). Offsets stay dense and are never reused across
// the seam (I1).
//
// Restore rebuilds a lost stream's current log on another root from its
// published prefix (the WAL replica and the table), fencing its next offset
// past anything the lost writer may have acknowledged and recording the
// skipped range as a hole (I1, docs/design.md §4.11); with Revive it
// continues a retired stream on a new log from exactly its end. It writes
// a marker in the stream's home first and commits the metadata last, so a
// killed restore finishes on the next run.
//
// Ingest writes a bulk load (pkg/schema/source) straight to the current
// log's files with its next offsets, resumable after a kill. CreateFirst
// starts a stream that exists nowhere: its first log, then its first
// metadata under a newly minted stream_id (I8); serve and Ingest both start
// a stream through it, so a stream is the same whichever started it. An online
// migration runs in a worker child of serve: ServeMigrateJobs reads its
// jobs and writes its answers, one JSON line each (WriteJob, ReadAnswer).
//
// It sits above pkg/meta and pkg/logstore and below pkg/broker and cmd; it
// knows nothing of the config file, the server or the protocol: the caller
// passes the stream's layout and declaration. It is its own package because
// it is the one part of pkg/meta that opens a log for writing, so pkg/meta
// never does.
package lifecycle

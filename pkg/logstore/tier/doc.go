// Package tier holds the maintenance steps that move a log's rows between
// its tiers (docs/design.md §4): Seal (buffer to local Parquet files),
// Compact (small files merged into larger ones), Publish (files into the
// Iceberg table), Evict and Clean (buffered rows and local files that a
// lower tier holds), CleanPublished (expired snapshots and unreferenced
// objects), DeleteBelow (everything below a retention floor),
// PublishAll (the offline flush of seal and publish together) and Ingest
// (a bulk load written straight to files with the log's next offsets).
//
// The cut runs between the log and what is done to it: pkg/logstore is
// one log (its buffer, its records, its scans and its lifecycle), and
// every step here operates on a *logstore.Log through the record API it
// exports for them: the role locks (Acquire) and the commit lock, one
// write transaction on buffer.db at a time (Update), the published
// table's handle, the log's clock and its crash-point test hook. Keeping
// the published half alone in a package of its own was the other choice;
// it would have left seal, compaction and the local clean in logstore,
// which share their records, locks and delete queue with publishing.
//
// Every step follows one protocol (docs/design.md §4.4): it records its
// intent (the range and the name of what it will create) in buffer.db
// before the file or object exists, and completes in one transaction that
// drops the intent; a crash at any point leaves an intent that the step's
// next pass (or, for seal, the next Open) undoes or finishes. Files leave
// the records before they are deleted, through the delete queue, after a
// grace. A step runs under its role's lock, so one process runs it on a
// log at a time; a step never deletes the only copy of a row.
//
// This package never appends a row, never scans one for a reader, and
// never loops: running the steps on a schedule over many logs is
// pkg/logstore/maintain's job.
package tier

// Package warehouse owns the published side of a log's storage: the log's
// Iceberg table under its published location (Table, placed under a
// publoc.Location): the catalog, uploads, reading and removing objects,
// listing metadata and the live set of objects the metadata reaches.
// It guarantees that a table is only published into by the log that
// created it (I8, Owner) and that an upload is durable before the commit
// that references it (I3 for the published tier). It never reads or
// writes a log's buffer.db or local files, and never imports logstore:
// logstore imports it.
package warehouse

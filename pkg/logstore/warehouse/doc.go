// Package warehouse owns the published side of a log's storage: where it
// is published (Location, read by Parse, the one parser of an s3:// prefix,
// a file:// URL or a directory, for config, a log's stored config and
// command lines alike; S3, the product's one S3 settings type), and the
// log's Iceberg table under that location (Table): the catalog, uploads,
// reading and removing objects, listing metadata and the live set of
// objects the metadata reaches. It guarantees that a table is only
// published into by the log that created it (I8, Owner) and that an upload
// is durable before the commit that references it (I3 for the published
// tier).
//
// It never reads or writes a log's buffer.db or local files, never accepts
// credentials in a location (ErrCredentials), and never imports logstore:
// logstore imports it. It is its own package because the Iceberg table is
// a seam with a small API of its own, like a litestream storage backend:
// the catalog, the object store and their SDKs stay behind Table.
package warehouse

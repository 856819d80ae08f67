// Package parquetfile owns the bytes of one Parquet file and the Arrow
// records that go into and come out of it: writing a record as one zstd
// row group and fsyncing it (Write; I3 for a sealed file), reading a
// footer and a row group with decoder panics turned into errors, a
// prefetching Source that remembers the first I/O error, and the Arrow
// helpers that order, take and size records and give their columns
// Iceberg field ids. It knows nothing of logs, offsets or buffer.db, never
// decides which file holds what, and never imports logstore: logstore
// imports it.
package parquetfile

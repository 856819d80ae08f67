// Package parquetfile owns the bytes of one Parquet file and the Arrow
// records that go into and come out of it: writing zstd row groups and
// fsyncing the file (Write for one record, Writer for a file written a
// row group at a time; I3 for a sealed file), reading a
// footer and a row group with decoder panics turned into errors, a
// prefetching Source that remembers the first I/O error, and the Arrow
// helpers that order, take, concatenate and size records and give their columns
// Iceberg field ids. It knows nothing of logs, offsets or buffer.db, never
// decides which file holds what, and never imports logstore: logstore
// imports it. It is its own package because the file format is a seam: its
// API (records in, records out) reads alone, and arrow-go's Parquet
// reader and writer stay behind it.
package parquetfile

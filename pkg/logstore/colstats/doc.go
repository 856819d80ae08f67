// Package colstats owns the per-column statistics that buffer.db records
// for each file: their JSON form, their computation when seal writes a
// file, and their merging when compaction writes a file from row groups or
// a log's records are rolled up (logstore's Summary). Scans prune files by
// the min and max; the null counts are rolled up into the stream metadata.
// A statistic some part lacks (an old record has no null counts) leaves
// the merged one unknown, never a guess, so pruning never skips a file
// that may match. It reads no files and never imports logstore: logstore
// imports it.
package colstats

// Package colstats owns the merging of per-column min/max statistics, the
// JSON that buffer.db records for each file and that scans prune files by:
// a compaction merges its inputs' statistics into the merged file's with a
// Merger. A column one input has no statistics for gets none, so pruning
// never skips a file that may match. It reads no files and never imports
// logstore: logstore imports it.
package colstats

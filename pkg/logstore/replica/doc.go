// Package replica ships a log's buffer.db WAL to an off-box replica, and
// brings a buffer.db back from one, using litestream as a library.
//
// The replica of log L of stream S lives at <prefix>/S/_wal/L/, beside the
// stream's tables and never inside one, so no Iceberg reader and no sweep of
// a table directory ever sees it (docs/design.md §4.9). The replica is the
// off-box copy of the rows that are not published yet: between it and the
// published table, a lost machine loses at most the replication lag.
//
// It never writes buffer.db itself (litestream reads its WAL and runs its
// checkpoints), never decides which offsets a restored log may issue (that is
// the restore's fence, in pkg/meta's lifecycle), and keeps no state outside a
// Replicator's lifetime.
package replica

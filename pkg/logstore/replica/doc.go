// Package replica ships a log's buffer.db WAL to an off-box replica, and
// brings a buffer.db back from one, using litestream as a library. It also
// owns the command line of `streamcast replicate`, the child serve runs to
// ship its logs' WAL (Args, its flags, its rendering and ParseArgs): serve
// renders it and the command reads it back, from one definition.
//
// The replica of log L of stream S lives at <destination>/S/L/, or without a
// destination at <prefix>/S/_wal/L/, beside the stream's tables and never
// inside one, so no Iceberg reader and no sweep of a table directory ever
// sees it (docs/design.md §4.9). The replica is the off-box copy of the rows
// that are not published yet: between it and the published table, a lost
// machine loses at most the replication lag. So it never ships into the
// root that holds the log (TargetFor refuses, and the config refuses it
// earlier): losing the root would lose the replica with it.
//
// It never writes buffer.db itself (litestream reads its WAL and runs its
// checkpoints), never decides which offsets a restored log may issue (that is
// the restore's fence, in pkg/meta/lifecycle), and keeps no state outside
// a Run. It is its own package, above logstore, because WAL replication is
// litestream's seam: its API (Run, Restore, Client) reads alone, and
// litestream stays behind it.
package replica

// Package activity reads a cheap fingerprint of a log's stored state
// without opening the log: the header of SQLite's WAL index while some
// process has the log open, else the size and modification time of the
// buffer database and its WAL. Two equal fingerprints mean no transaction
// committed in between, so the maintenance loop (pkg/logstore/maintain)
// skips a log whose last step found nothing to do; a pass over thousands
// of idle logs costs little more than one read or stat each.
//
// It sits below pkg/logstore, which names the files (logstore.ReadActivity)
// and must never import logstore or its other sub-packages. It never opens
// a database, takes a lock or writes: it only reads file headers and
// stats.
package activity

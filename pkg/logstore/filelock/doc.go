// Package filelock takes an exclusive lock on a file without waiting: a
// flock on Unix, a byte-range lock on Windows. The kernel drops it when the
// holding process dies, so a crashed holder never leaves a stale lock
// behind; the holder's pid, written into the file, serves error messages
// only.
//
// It sits below pkg/logstore, which names the lock files (a log's writer
// lock, its maintenance roles' locks) and words the errors for its
// callers; it must never import logstore or its other sub-packages. It
// never waits for a lock and never removes a lock file.
package filelock

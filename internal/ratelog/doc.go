// Package ratelog keeps a repeating failure from flooding the log. The first
// occurrence of a failure is logged at once; later ones within the interval
// are only counted, and the count is logged with the next occurrence after
// the interval, or when the failure clears. A full disk that fails every
// commit group thus gives one line, then one line per interval, then one
// "recovered" line, instead of thousands.
//
// It owns no goroutine and never sleeps: summaries are written by the calls
// that report occurrences. It must never drop the first occurrence of a
// failure, and never hide that a failure cleared. It imports nothing of the
// module, so every layer may use it: the committer and the maintenance
// loop both report through it.
package ratelog

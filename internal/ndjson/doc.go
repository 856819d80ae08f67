// Package ndjson moves rows between a stream and newline-delimited JSON: the
// engines of `streamcast tail` and `streamcast publish`, and the cursor files
// tail keeps its place in.
//
// Tail writes one line per row and moves its Cursor only past rows whose
// lines were written and flushed; a Cursor never rewinds on its own, and
// saves atomically. An Output (`tail --output`) is kept with a local Cursor
// so the pair holds every row exactly once: each save records the output's
// length, and a rerun cuts what was written after it, never a file the
// cursor did not record. Load validates each input row with the server's schema
// code before sending it, and numbers an exactly-once load by each accepted
// row's ordinal in the input, so a rerun skips exactly what landed. Both
// are built on pkg/wire's client and never import the broker.
//
// Options are checked one way: each options type has a Default constructor
// and a Validate that refuses a value out of range, worded with the flag
// that sets it, and never replaces it. Every goroutine Tail or Load starts
// has ended by the time it returns.
package ndjson

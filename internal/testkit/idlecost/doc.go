// Package idlecost measures what idle durable streams cost a running
// server: it starts the real streamcast binary with a generated config of
// many durable streams, lets it settle, and reads the resident memory,
// open descriptors and CPU time of serve and of each maintenance child
// from /proc over an idle window (a thousand streams must cost
// little). It is a benchmark only (BenchmarkIdleStreams), skipped with
// -short and off Linux; it never runs in the README's test command's
// budget unless asked for with -bench.
package idlecost

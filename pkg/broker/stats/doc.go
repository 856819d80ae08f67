// Package stats defines the /stats document (Stats, StreamStats,
// ProcessStats) and reads the figures that need no server: the process's
// CPU time and memory, and a log's replication progress. It is the
// document's only definition: the broker fills it, Write and WriteHealth
// shape the answers, and the load generator (internal/loadgen) decodes
// /stats into these same types.
//
// It owns no goroutine and holds no state; it must never read a stream,
// a connection or a request (the broker fills those fields and decides
// who may see them).
package stats

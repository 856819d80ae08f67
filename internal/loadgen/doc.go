// Package loadgen is the load generator behind `streamcast bench`: Run drives
// a running server's stream with publishers and subscribers and measures
// rates, latencies, drops and gaps; Idle holds idle subscribers and measures
// the server's memory per connection.
//
// It talks to the server only as a client does, through pkg/wire (event
// streams through net/http, as a browser's EventSource does), and reads
// the server's /stats with the server's own types (broker.Stats), so the two
// can never disagree about that document, so it sits beside cmd, above
// pkg/broker. It is tooling, not protocol: the server never imports it. Every goroutine Run or Idle starts has ended by the
// time it returns.
package loadgen

// Package wire is streamcast's protocol 4: the greeting, data frames, publish
// frames and replies, close codes with their JSON reasons, and the typed errors
// a client branches on. It also holds the Go client (Subscribe, Publish) and the
// load generator behind `streamcast bench`.
//
// Encoders here are shared by the server and the client, so the two can never
// disagree about a frame: AppendFrame is the one encoding of a data frame (I4),
// and every refusal is a typed error whose Reason is the close reason the server
// sends and whose parse (ParseClose) is what the client returns. The client
// checks that offsets strictly increase within a subscription (I2 seen from the
// outside) and reports a violation as a ProtocolError rather than guessing (I6).
//
// The engines of the shell tools live here too, so tests reach them: Tail
// (`streamcast tail`) with its Cursor, a file that moves only past rows whose
// lines were written and never rewinds on its own, and Load (`streamcast
// publish`), which validates rows with the server's schema code before
// sending and numbers an exactly-once load by each accepted row's ordinal in
// the input, so a rerun skips exactly what landed.
//
// The package never imports the broker, and never panics on bytes from the
// network: every parser returns an error instead.
package wire

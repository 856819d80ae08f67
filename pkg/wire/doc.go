// Package wire is streamcast's protocol 4 and its Go client: the greeting,
// data frames, publish frames and replies, close codes with their JSON
// reasons, the typed errors a client branches on, and Subscribe and Publish.
//
// Encoders here are shared by the server and the client, so the two can never
// disagree about a frame: AppendFrame is the one encoding of a data frame (I4),
// and every refusal is a typed error whose Reason is the close reason the server
// sends and whose parse (ParseClose) is what the client returns. The client
// checks that offsets strictly increase within a subscription (I2 seen from the
// outside) and reports a violation as a ProtocolError rather than guessing (I6).
// Subscribe and Publish offer permessage-deflate with server context
// takeover and inflate what the server compressed with history beneath
// gorilla/websocket, which alone would accept only messages compressed
// each on its own (inflateconn.go).
// A Publisher may coalesce the frames of a burst into one socket write
// (PublishOptions.Coalesce): that changes how bytes meet the socket, never a
// frame or the order of frames.
//
// It also builds the complete WebSocket frames a server writes itself
// (header and payload, unmasked, final), which the broker and a relay
// share: a committed row's data frame, encoded once and shared by every
// subscriber and by replay (AppendDataFrame, EncodeDataFrames, I4), the
// replies to publishers (OKReplyFrame, ErrorReplyFrame, OffsetsReplyFrame),
// the ping, pong and close frames, and, for a writer without writev (TLS),
// WriteCoalesced, which copies small frames into few writes. Those hold no
// connection and no lock, and never own a socket.
//
// The command-line tooling built on the client lives elsewhere:
// internal/ndjson (tail, publish from NDJSON, cursor files) and
// internal/loadgen (bench). The package imports only pkg/schema of the
// module: never the broker, storage or stream metadata, so any program can
// link the client alone. It never panics on bytes from the network: every
// parser returns an error instead.
package wire

// Package frame builds the complete WebSocket frames the server writes
// itself (header and payload, unmasked, final): the data frame of a
// committed row, encoded once and shared by every subscriber and by replay
// (I4), the replies to publishers, and the ping, pong and close frames.
//
// It sits below pkg/broker: broker imports it, and it must never import
// broker or its other sub-packages. It encodes bytes and, for a writer
// without writev, coalesces them into few writes (WriteCoalesced): it holds
// no connection and no lock, no state but a pool of copy buffers, and
// never owns a socket.
package frame

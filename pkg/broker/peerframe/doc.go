// Package peerframe follows the WebSocket frames a peer sends, header by
// header, in front of gorilla/websocket's reader, to see what gorilla's API
// hides: a close frame whose payload is a single byte (RFC 6455 §5.5.1), a
// protocol error that the server answers 1002 but gorilla reports exactly
// like a close with no payload. Hijack puts a Conn between gorilla and the
// socket during the upgrade; Conn shows every byte gorilla reads to its
// Follower.
//
// It sits below pkg/broker: broker imports it, and it must never import
// broker or its other sub-packages. It never keeps a payload byte, never
// writes to the connection (the server writes to the raw connection, with
// writev that a wrapper would hide) and never decides how to answer a
// peer: it only reports what the peer sent.
package peerframe

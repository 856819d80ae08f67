// Package pubframe reads and decodes the frames a publisher sends: a row
// (a JSON object) or a list of rows, or, from an exactly-once publisher,
// [seq, row] or [seq, [rows…]]. Each row is validated by the stream's
// schema and kept in its canonical form; a frame that fails is answered
// with the reply's error code (wire.ReplyBadFrame, wire.ReplyRejected) and a
// detail saying what is wrong and how to send it right, and a frame that is
// not JSON says at which byte it stops being JSON.
//
// It sits below pkg/broker: broker imports it, and it must never import
// broker or its other sub-packages. It runs on the publisher's reader
// goroutine, never on the committer; it holds no connection and no lock,
// never commits, and never writes a reply: the broker does.
package pubframe

// Package marks is the exactly-once state of a stream: each publisher id's
// mark, the verdict on each frame an exactly-once publisher sends, the marks
// a group commits with its rows, and the dedupe window that answers a
// duplicate with its original offsets (docs/design.md, exactly-once
// publishers).
//
// A publisher that connects with &publisher=ID to a stream declared
// exactly_once numbers its rows: each frame is [seq, row] or [seq, [rows…]],
// the rows taking seq, seq+1, …. The stream keeps one mark per id, the last
// seq committed and the offset of its row, and commits the mark in the same
// SQLite transaction as the rows (logstore.Append's marks), so the mark can
// never run ahead of or behind the rows, across a restart or a SIGKILL.
//
// Three seq positions are kept per id, in this order:
//
//	lastSeq  ≤  appended  ≤  accepted
//
// accepted is what the reader judges frames against: it counts rows queued for
// commit and not yet committed, so a frame sent right behind another is
// judged as its successor, not as a gap. appended is the committer's: the last
// seq handed to an Append that succeeded (or is in progress). lastSeq (with
// lastOffset) is the committed mark as subscribers have seen it: it moves after
// the group is fanned out, with the dedupe window.
//
// Judging a frame of n rows at seq s against accepted A:
//   - s > A+1: sequence_gap {expected A+1, got s}; nothing is queued.
//   - s+n-1 ≤ A: a duplicate, not appended; the reply is {"ok":[…],"duplicate":true}
//     with the original offsets while the rows are in the dedupe window (the
//     last 64 committed frames of the id, for the 4,096 most recently active
//     ids of the stream), null beyond it. A duplicate of rows still queued is
//     answered once they commit, so its offsets are known and durable (I3).
//   - otherwise the rows above A are queued (a frame overlapping the mark
//     appends only its new rows); the reply is {"ok":[…]} with every row's
//     offset: the original offsets of the repeated part when the window still
//     holds them, null when not. "duplicate":true means nothing of the frame
//     was appended.
//
// A fresh id's mark is last_seq 0 and last_offset null, so its first seq is 1;
// seq 0 and negative seqs are refused as bad_frame.
//
// A commit that fails rolls accepted and appended back to the last seq the log
// holds, and every frame of that id queued behind the failed one is answered
// commit_failed too (it would otherwise land after a hole): the publisher
// resends from the mark. A second connection with the same id supersedes the
// first: the first reads no more frames, its queued frames are committed and
// answered, then it is closed 4409; the second is greeted only once every row
// queued under the id is settled, so its last_seq counts them all.
//
// It sits below pkg/broker: broker imports it, and it must never import
// broker or its other sub-packages. It knows nothing of connections: a
// connection's hold on an id is a Holder (with the func that supersedes it),
// a queued frame is whatever job type the caller gives Marks (Job), and a
// reply is an Answer in plain values that the caller encodes. It never
// appends rows and never reads a socket; the caller commits the marks Admit
// returns in the same transaction as the rows.
package marks

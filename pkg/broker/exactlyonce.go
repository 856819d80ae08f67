package broker

import (
	"github.com/streamcast/streamcast/pkg/wire"
)

// Exactly-once publishing: streamMarks (marks.go) judges frames against a
// publisher's mark, and documents how; this file is the job's side of
// markJob, the encoding of a markAnswer, and the parsing of an exactly-once
// frame.

// MarkFrame implements markJob.
func (j *job) MarkFrame() *markedFrame { return &j.eo }

// Rows implements markJob.
func (j *job) Rows() int { return len(j.rows) }

// answerFrame encodes the reply marks decided on.
func answerFrame(a markAnswer) []byte {
	switch {
	case a.Failed != "":
		return wire.ErrorReplyFrame(wire.ReplyCommitFailed, a.Failed)
	case a.Gap != nil:
		return wire.ReplyFrame(48, a.Gap.AppendReply)
	case a.Offsets != nil:
		return wire.OffsetsReplyFrame(a.Offsets, a.Duplicate)
	default:
		return wire.OKReplyFrame(a.First, a.N)
	}
}

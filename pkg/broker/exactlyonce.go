package broker

import (
	"github.com/streamcast/streamcast/pkg/wire"
)

// Exactly-once publishing: package marks judges frames against a
// publisher's mark, and documents how; this file is what broker adds: the
// job's side of marks.markJob, the encoding of an Answer, and the parsing of an
// exactly-once frame.

// MarkFrame implements marks.markJob.
func (j *job) MarkFrame() *markedFrame { return &j.eo }

// Rows implements marks.markJob.
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

package broker

import (
	"fmt"
	"strconv"

	"github.com/streamcast/streamcast/pkg/broker/frame"
	"github.com/streamcast/streamcast/pkg/broker/marks"
	"github.com/streamcast/streamcast/pkg/wire"
)

// Exactly-once publishing: package marks judges frames against a
// publisher's mark, and documents how; this file is what broker adds: the
// job's side of marks.Job, the encoding of an Answer, and the parsing of an
// exactly-once frame.

// MarkFrame implements marks.Job.
func (j *job) MarkFrame() *marks.Frame { return &j.eo }

// Rows implements marks.Job.
func (j *job) Rows() int { return len(j.rows) }

// answerFrame encodes the reply marks decided on.
func answerFrame(a marks.Answer) []byte {
	switch {
	case a.Failed != "":
		return frame.ErrorReply(wire.ReplyCommitFailed, a.Failed)
	case a.Gap != nil:
		return frame.Reply(48, a.Gap.AppendReply)
	case a.Offsets != nil:
		return frame.OffsetsReply(a.Offsets, a.Duplicate)
	default:
		return frame.OKReply(a.First, a.N)
	}
}

// decodeSeq splits an exactly-once frame, [seq, row] or [seq, [rows…]], and
// validates its rows. On failure it returns the reply's error code and detail.
func (p *publisher) decodeSeq(rows [][]byte, data []byte) (int64, [][]byte, string, string) {
	const shape = "a publisher with an id sends [seq, row] or [seq, [rows…]], seq being the number of the frame's first row"
	b := trimSpace(data)
	if len(b) == 0 {
		return 0, nil, wire.ReplyBadFrame, "publish frame is empty; " + shape
	}
	if b[0] != '[' {
		return 0, nil, wire.ReplyBadFrame, "publish frame is " + jsonKind(b[0]) + " without a seq; " + shape
	}
	elems, err := splitArray(b)
	if err != nil {
		return 0, nil, wire.ReplyBadFrame, "publish frame is not JSON: " + err.Error()
	}
	if len(elems) == 0 || elems[0][0] == '{' || elems[0][0] == '[' {
		return 0, nil, wire.ReplyBadFrame, "publish frame has no seq; " + shape
	}
	if len(elems) != 2 {
		return 0, nil, wire.ReplyBadFrame, fmt.Sprintf("publish frame has %d elements; %s", len(elems), shape)
	}
	seq, err := strconv.ParseInt(string(elems[0]), 10, 64)
	if err != nil || seq < 1 {
		return 0, nil, wire.ReplyBadFrame, fmt.Sprintf("seq %.30s is not a whole number ≥ 1 (a fresh publisher id starts at 1; resume from the greeting's last_seq + 1)", elems[0])
	}
	rows, code, detail := p.decode(rows, elems[1])
	if code != "" {
		return 0, nil, code, detail
	}
	if seq > 1<<62-int64(len(rows)) {
		return 0, nil, wire.ReplyBadFrame, fmt.Sprintf("seq %d is too large; seqs stay below 2^62", seq)
	}
	return seq, rows, "", ""
}

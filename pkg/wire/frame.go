package wire

import (
	"encoding/binary"
)

// WebSocket opcodes of the frames the server writes itself. OpPing and
// OpPong are the control frames a connection builds with ControlFrame.
const (
	opText  = 0x1
	opClose = 0x8
	OpPing  = 0x9
	OpPong  = 0xA
	finBit  = 0x80
)

// headerLen is the length of the header of an unmasked server frame
// carrying n payload bytes.
func headerLen(n int) int {
	switch {
	case n < 126:
		return 2
	case n < 1<<16:
		return 4
	default:
		return 10
	}
}

// appendHeader appends the header of an unmasked, final server frame.
func appendHeader(dst []byte, op byte, n int) []byte {
	switch {
	case n < 126:
		return append(dst, finBit|op, byte(n))
	case n < 1<<16:
		return append(dst, finBit|op, 126, byte(n>>8), byte(n))
	default:
		dst = append(dst, finBit|op, 127)
		return binary.BigEndian.AppendUint64(dst, uint64(n))
	}
}

// TextFrame returns payload as one complete text frame (header included).
func TextFrame(payload []byte) []byte {
	b := make([]byte, 0, headerLen(len(payload))+len(payload))
	b = appendHeader(b, opText, len(payload))
	return append(b, payload...)
}

// ControlFrame returns a ping, pong or close frame (payload ≤ 125 bytes).
func ControlFrame(op byte, payload []byte) []byte {
	if len(payload) > 125 {
		payload = payload[:125]
	}
	b := make([]byte, 0, 2+len(payload))
	b = appendHeader(b, op, len(payload))
	return append(b, payload...)
}

// CloseFrame returns a close frame with code and reason (reason ≤ 123 bytes).
func CloseFrame(code int, reason string) []byte {
	p := make([]byte, 2, 2+len(reason))
	binary.BigEndian.PutUint16(p, uint16(code))
	p = append(p, reason...)
	return ControlFrame(opClose, p)
}

// digits returns the number of decimal digits of v ≥ 0.
func digits(v int64) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// frameLen is the length of the complete frame of a row (header + payload).
func frameLen(offset, ts int64, rowLen int) int {
	p := 4 + rowLen // [ , , ]
	if offset == Null {
		p += 4
	} else {
		p += digits(offset)
	}
	p += digits(ts)
	return headerLen(p) + p
}

// AppendDataFrame appends the complete WebSocket frame of the data frame
// [offset,ts,row]. The live path (committer) and the replay path both call it,
// so a replayed frame is byte-identical to the live one (I4).
func AppendDataFrame(dst []byte, offset, ts int64, row []byte) []byte {
	p := 4 + len(row)
	if offset == Null {
		p += 4
	} else {
		p += digits(offset)
	}
	p += digits(ts)
	dst = appendHeader(dst, opText, p)
	return AppendFrame(dst, offset, ts, row)
}

// EncodeDataFrames encodes rows committed from first (wire.Null on a live-only
// stream) with stamp ts into one shared arena; frames[i] is row i's frame.
func EncodeDataFrames(rows [][]byte, first, ts int64) [][]byte {
	size := 0
	for i, r := range rows {
		off := first
		if first != Null {
			off = first + int64(i)
		}
		size += frameLen(off, ts, len(r))
	}
	arena := make([]byte, 0, size)
	frames := make([][]byte, len(rows))
	for i, r := range rows {
		off := first
		if first != Null {
			off = first + int64(i)
		}
		start := len(arena)
		arena = AppendDataFrame(arena, off, ts, r)
		frames[i] = arena[start:len(arena):len(arena)]
	}
	return frames
}

// ReplyFrame builds a complete reply frame from a payload appender with one
// allocation: the header is written in front of the payload afterwards.
func ReplyFrame(sizeHint int, build func([]byte) []byte) []byte {
	const reserve = 10
	b := make([]byte, reserve, reserve+sizeHint)
	b = build(b)
	n := len(b) - reserve
	h := headerLen(n)
	appendHeader(b[reserve-h:reserve-h], opText, n)
	return b[reserve-h:]
}

// AppendOKReplyFrame appends OKReplyFrame(first, n) to buf and returns buf and the
// frame, a slice of it. The replies of a commit group share one buffer this
// way, one allocation per group instead of one per frame; the frames stay
// valid after buf grows, as append never writes below len(buf).
func AppendOKReplyFrame(buf []byte, first int64, n int) (grown, frame []byte) {
	// A 10-row ack ({"ok":[first,...,+9]} of 12-digit offsets) passes the
	// 125 bytes of a 2-byte header; reserve the longest header and start
	// the frame where its actual header does.
	const reserve = 10
	start := len(buf)
	buf = append(buf, make([]byte, reserve)...)
	buf = AppendOK(buf, first, n)
	payload := len(buf) - start - reserve
	at := start + reserve - headerLen(payload)
	appendHeader(buf[at:at], opText, payload)
	return buf, buf[at:len(buf):len(buf)]
}

// OKReplyFrameRoom is at least the bytes AppendOKReplyFrame(buf, first, n) appends,
// to size a buffer that a commit group's acks then share without growing.
func OKReplyFrameRoom(first int64, n int) int {
	d := 4 // "null"
	if first != Null {
		d = digits(first + int64(max(n-1, 0)))
	}
	// The reserved header, {"ok":[ and ]}, and n offsets with their commas.
	return 10 + 9 + n*(d+1)
}

// OKReplyFrame is the reply acknowledging n rows committed from offset first.
func OKReplyFrame(first int64, n int) []byte {
	return ReplyFrame(8+n*12, func(b []byte) []byte { return AppendOK(b, first, n) })
}

// ErrorReplyFrame is the reply refusing a frame with code and detail.
func ErrorReplyFrame(code, detail string) []byte {
	return ReplyFrame(32+len(detail), func(b []byte) []byte { return AppendErrorReply(b, code, detail) })
}

// OffsetsReplyFrame builds {"ok":[offsets]} (plus "duplicate":true).
func OffsetsReplyFrame(offs []int64, duplicate bool) []byte {
	r := Reply{OK: offs, Duplicate: duplicate}
	return ReplyFrame(20+len(offs)*12, r.AppendJSON)
}

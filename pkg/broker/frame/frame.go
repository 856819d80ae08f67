package frame

import (
	"encoding/binary"

	"github.com/streamcast/streamcast/pkg/wire"
)

// WebSocket opcodes of the frames the server writes itself. OpPing and
// OpPong are the control frames a connection builds with Control.
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

// Text returns payload as one complete text frame (header included).
func Text(payload []byte) []byte {
	b := make([]byte, 0, headerLen(len(payload))+len(payload))
	b = appendHeader(b, opText, len(payload))
	return append(b, payload...)
}

// Control returns a ping, pong or close frame (payload ≤ 125 bytes).
func Control(op byte, payload []byte) []byte {
	if len(payload) > 125 {
		payload = payload[:125]
	}
	b := make([]byte, 0, 2+len(payload))
	b = appendHeader(b, op, len(payload))
	return append(b, payload...)
}

// Close returns a close frame with code and reason (reason ≤ 123 bytes).
func Close(code int, reason string) []byte {
	p := make([]byte, 2, 2+len(reason))
	binary.BigEndian.PutUint16(p, uint16(code))
	p = append(p, reason...)
	return Control(opClose, p)
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
	if offset == wire.Null {
		p += 4
	} else {
		p += digits(offset)
	}
	p += digits(ts)
	return headerLen(p) + p
}

// AppendData appends the complete WebSocket frame of the data frame
// [offset,ts,row]. The live path (committer) and the replay path both call it,
// so a replayed frame is byte-identical to the live one (I4).
func AppendData(dst []byte, offset, ts int64, row []byte) []byte {
	p := 4 + len(row)
	if offset == wire.Null {
		p += 4
	} else {
		p += digits(offset)
	}
	p += digits(ts)
	dst = appendHeader(dst, opText, p)
	return wire.AppendFrame(dst, offset, ts, row)
}

// Encode encodes rows committed from first (wire.Null on a live-only
// stream) with stamp ts into one shared arena; frames[i] is row i's frame.
func Encode(rows [][]byte, first, ts int64) [][]byte {
	size := 0
	for i, r := range rows {
		off := first
		if first != wire.Null {
			off = first + int64(i)
		}
		size += frameLen(off, ts, len(r))
	}
	arena := make([]byte, 0, size)
	frames := make([][]byte, len(rows))
	for i, r := range rows {
		off := first
		if first != wire.Null {
			off = first + int64(i)
		}
		start := len(arena)
		arena = AppendData(arena, off, ts, r)
		frames[i] = arena[start:len(arena):len(arena)]
	}
	return frames
}

// Reply builds a complete reply frame from a payload appender with one
// allocation: the header is written in front of the payload afterwards.
func Reply(sizeHint int, build func([]byte) []byte) []byte {
	const reserve = 10
	b := make([]byte, reserve, reserve+sizeHint)
	b = build(b)
	n := len(b) - reserve
	h := headerLen(n)
	appendHeader(b[reserve-h:reserve-h], opText, n)
	return b[reserve-h:]
}

// AppendOKReply appends OKReply(first, n) to buf and returns buf and the
// frame, a slice of it. The replies of a commit group share one buffer this
// way, one allocation per group instead of one per frame; the frames stay
// valid after buf grows, as append never writes below len(buf).
func AppendOKReply(buf []byte, first int64, n int) (grown, frame []byte) {
	// A 10-row ack ({"ok":[first,...,+9]} of 12-digit offsets) passes the
	// 125 bytes of a 2-byte header; reserve the longest header and start
	// the frame where its actual header does.
	const reserve = 10
	start := len(buf)
	buf = append(buf, make([]byte, reserve)...)
	buf = wire.AppendOK(buf, first, n)
	payload := len(buf) - start - reserve
	at := start + reserve - headerLen(payload)
	appendHeader(buf[at:at], opText, payload)
	return buf, buf[at:len(buf):len(buf)]
}

// OKReplyRoom is at least the bytes AppendOKReply(buf, first, n) appends,
// to size a buffer that a commit group's acks then share without growing.
func OKReplyRoom(first int64, n int) int {
	d := 4 // "null"
	if first != wire.Null {
		d = digits(first + int64(max(n-1, 0)))
	}
	// The reserved header, {"ok":[ and ]}, and n offsets with their commas.
	return 10 + 9 + n*(d+1)
}

// OKReply is the reply acknowledging n rows committed from offset first.
func OKReply(first int64, n int) []byte {
	return Reply(8+n*12, func(b []byte) []byte { return wire.AppendOK(b, first, n) })
}

// ErrorReply is the reply refusing a frame with code and detail.
func ErrorReply(code, detail string) []byte {
	return Reply(32+len(detail), func(b []byte) []byte { return wire.AppendErrorReply(b, code, detail) })
}

// OffsetsReply builds {"ok":[offsets]} (plus "duplicate":true).
func OffsetsReply(offs []int64, duplicate bool) []byte {
	r := wire.Reply{OK: offs, Duplicate: duplicate}
	return Reply(20+len(offs)*12, r.AppendJSON)
}

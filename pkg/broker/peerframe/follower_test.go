package peerframe

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// clientFrame is one masked client frame with the given opcode and payload.
func clientFrame(op byte, payload []byte) []byte {
	b := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n < 1<<16:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	mask := []byte{0x12, 0x34, 0x56, 0x78}
	b = append(b, mask...)
	for i, c := range payload {
		b = append(b, c^mask[i%4])
	}
	return b
}

// TestFollowerFollowsFramesInAnyChunking: the frame follower finds every
// header, and the 1-byte close, however the bytes are cut into reads.
func TestFollowerFollowsFramesInAnyChunking(t *testing.T) {
	var stream []byte
	stream = append(stream, clientFrame(0x1, bytes.Repeat([]byte("a"), 125))...)
	stream = append(stream, clientFrame(0x9, []byte("ping"))...)
	stream = append(stream, clientFrame(0x2, bytes.Repeat([]byte("b"), 300))...)
	stream = append(stream, clientFrame(0x1, bytes.Repeat([]byte("c"), 70000))...)
	stream = append(stream, clientFrame(opClose, []byte{1})...)
	for _, chunk := range []int{1, 2, 3, 7, 13, 64, 4096, len(stream)} {
		var f Follower
		for p := stream; len(p) > 0; {
			k := min(chunk, len(p))
			f.See(p[:k])
			p = p[k:]
		}
		if f.frames != 5 || !f.BadClose() || f.n != 0 || f.left != 0 {
			t.Errorf("in chunks of %d: frames %d, badClose %v, n %d, left %d; want 5 frames, the bad close, and nothing pending", chunk, f.frames, f.BadClose(), f.n, f.left)
		}
	}
	// Only the first close frame is the peer's close; one read ahead of
	// it is never answered.
	var f Follower
	f.See(clientFrame(opClose, []byte{0x03, 0xe8}))
	f.See(clientFrame(opClose, []byte{1}))
	if f.BadClose() {
		t.Error("a 1-byte close after a well-formed one counted")
	}
}

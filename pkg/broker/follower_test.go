package broker

import (
	"bytes"
	"testing"

	"github.com/streamcast/streamcast/internal/testkit"
)

// TestFollowerFollowsFramesInAnyChunking: the frame follower finds every
// header, and the 1-byte close, however the bytes are cut into reads.
func TestFollowerFollowsFramesInAnyChunking(t *testing.T) {
	var stream []byte
	stream = append(stream, testkit.ClientFrame(0x1, bytes.Repeat([]byte("a"), 125))...)
	stream = append(stream, testkit.ClientFrame(0x9, []byte("ping"))...)
	stream = append(stream, testkit.ClientFrame(0x2, bytes.Repeat([]byte("b"), 300))...)
	stream = append(stream, testkit.ClientFrame(0x1, bytes.Repeat([]byte("c"), 70000))...)
	stream = append(stream, testkit.ClientFrame(testkit.OpClose, []byte{1})...)
	for _, chunk := range []int{1, 2, 3, 7, 13, 64, 4096, len(stream)} {
		var f peerFollower
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
	var f peerFollower
	f.See(testkit.ClientFrame(testkit.OpClose, []byte{0x03, 0xe8}))
	f.See(testkit.ClientFrame(testkit.OpClose, []byte{1}))
	if f.BadClose() {
		t.Error("a 1-byte close after a well-formed one counted")
	}
}

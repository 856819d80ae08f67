package wire

import (
	"bytes"
	"testing"
)

// TestAppendOKReplyMatchesOKReply: the acks a commit group builds in one
// shared buffer are byte for byte the ones OKReplyFrame builds alone, across the
// 2-, 4- and 10-byte header sizes, and a frame built before the buffer grew
// still holds its bytes afterwards.
func TestAppendOKReplyMatchesOKReply(t *testing.T) {
	cases := []struct {
		first int64
		n     int
	}{{1, 1}, {123456789012, 1}, {1, 9}, {123456789012, 10}, {5, 1000}, {1, 6000}}
	var buf []byte
	var frames [][]byte
	for _, c := range cases {
		var f []byte
		buf, f = AppendOKReplyFrame(buf, c.first, c.n)
		frames = append(frames, f)
	}
	for i, c := range cases {
		if want := OKReplyFrame(c.first, c.n); !bytes.Equal(frames[i], want) {
			t.Errorf("AppendOKReplyFrame(%d, %d) = %.40q…; want %.40q…", c.first, c.n, frames[i], want)
		}
	}
}

// TestOKReplyRoomFitsTheReply: a buffer of OKReplyFrameRoom bytes takes the ack
// without growing, so a commit group's acks share one allocation.
func TestOKReplyRoomFitsTheReply(t *testing.T) {
	for _, first := range []int64{Null, 0, 1, 9, 10, 99_999, 9_999_999, 1 << 40, 1<<62 - 200} {
		for _, n := range []int{1, 2, 9, 10, 100} {
			buf := make([]byte, 0, OKReplyFrameRoom(first, n))
			grown, f := AppendOKReplyFrame(buf, first, n)
			if cap(grown) != cap(buf) {
				t.Errorf("OKReplyFrameRoom(%d, %d) = %d; the ack %q needed the buffer to grow", first, n, cap(buf), f)
			}
		}
	}
}

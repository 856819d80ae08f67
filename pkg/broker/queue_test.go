package broker

import (
	"strconv"
	"testing"
)

// TestFrameQueueKeepsOrderAcrossWrapAndGrowth pushes and pops in uneven
// steps so the ring wraps and grows while it holds frames; every frame comes
// out once, in order, and a subscriber's ring never grows past its limit.
func TestFrameQueueKeepsOrderAcrossWrapAndGrowth(t *testing.T) {
	var q frameQueue
	const limit = 100
	in, out := 0, 0
	dst := make([][]byte, 7)
	for round := 0; round < 200; round++ {
		for k := 0; k < round%13 && q.Len() < limit; k++ {
			q.Push([]byte(strconv.Itoa(in)), limit)
			in++
		}
		if len(q.buf) > limit {
			t.Fatalf("ring grew to %d slots; its limit is %d", len(q.buf), limit)
		}
		n := q.Peek(dst[:round%7+1])
		for i := 0; i < n; i++ {
			if got := string(dst[i]); got != strconv.Itoa(out+i) {
				t.Fatalf("frame %q where %d was due", got, out+i)
			}
		}
		q.Pop(n)
		out += n
		if q.Len() != in-out {
			t.Fatalf("len %d, want %d", q.Len(), in-out)
		}
	}
}

// TestFrameQueueLetsWrittenFramesGo: a popped frame's slot is cleared, so
// the ring pins no frame (nor the group arena it shares) once written, and a
// drained ring larger than keptCap is let go.
func TestFrameQueueLetsWrittenFramesGo(t *testing.T) {
	var q frameQueue
	for i := 0; i < 3*keptCap; i++ {
		q.Push([]byte("x"), 0)
	}
	q.Pop(keptCap)
	for i, f := range q.buf[:keptCap] {
		if f != nil {
			t.Fatalf("slot %d still holds a written frame", i)
		}
	}
	q.Pop(q.Len())
	if q.buf != nil {
		t.Fatalf("a drained queue keeps %d slots; more than %d are let go", len(q.buf), keptCap)
	}
	q.Push([]byte("y"), 0)
	q.Pop(1)
	if q.buf == nil || q.buf[0] != nil {
		t.Fatal("a small drained ring is kept for the next burst, and cleared")
	}
}

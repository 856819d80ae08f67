package wire

import (
	"errors"
	"strings"
	"testing"
)

// TestWriteCoalescedKeepsFramesInOrder: the TLS write path hands every
// byte over, in order, in buffers of at most CoalesceChunk bytes (a frame
// larger than that on its own, uncopied).
func TestWriteCoalescedKeepsFramesInOrder(t *testing.T) {
	var frames [][]byte
	var want []byte
	for i, n := range []int{10, 200, CoalesceChunk - 5, 7, CoalesceChunk, 3, CoalesceChunk + 9, 1, 1} {
		b := []byte(strings.Repeat(string(rune('a'+i)), n))
		frames = append(frames, b)
		want = append(want, b...)
	}
	for range 3000 {
		b := []byte("[1,2,{}]")
		frames = append(frames, b)
		want = append(want, b...)
	}
	w := &writeRecorder{}
	n, err := WriteCoalesced(w, frames)
	if err != nil || n != int64(len(want)) {
		t.Fatalf("wrote %d bytes, err %v; want %d", n, err, len(want))
	}
	if string(w.all) != string(want) {
		t.Fatal("the bytes written differ from the frames in order")
	}
	for i, l := range w.writes {
		if l > CoalesceChunk && l != CoalesceChunk+9 {
			t.Fatalf("write %d is %d bytes, over CoalesceChunk %d", i, l, CoalesceChunk)
		}
	}
	if len(w.writes) > 10 {
		t.Fatalf("%d writes for %d frames; the small frames were not coalesced", len(w.writes), len(frames))
	}

	// A failed write stops at once and reports the bytes taken.
	fw := &writeRecorder{failAfter: 1}
	if _, err := WriteCoalesced(fw, frames); err == nil {
		t.Fatal("a failed write was not reported")
	}
}

type writeRecorder struct {
	all       []byte
	writes    []int
	failAfter int
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	if w.failAfter > 0 && len(w.writes) >= w.failAfter {
		return 0, errors.New("peer gone")
	}
	w.all = append(w.all, p...)
	w.writes = append(w.writes, len(p))
	return len(p), nil
}

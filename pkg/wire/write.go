package wire

import (
	"io"
	"sync"
)

// CoalesceChunk bounds the buffer WriteCoalesced copies frames into: four
// full TLS records.
const CoalesceChunk = 64 << 10

var sealBufs = sync.Pool{New: func() any { b := make([]byte, 0, CoalesceChunk); return &b }}

// WriteCoalesced writes frames to w, in order, as buffers of up to
// CoalesceChunk bytes; a frame as large as a buffer is written as it is,
// uncopied. It is for a writer without writev (TLS), which would make each
// small frame a record and a syscall of its own. It returns the bytes w
// took, and stops at the first failed write.
func WriteCoalesced(w io.Writer, frames [][]byte) (int64, error) {
	bp := sealBufs.Get().(*[]byte)
	b := (*bp)[:0]
	defer func() {
		*bp = b[:0]
		sealBufs.Put(bp)
	}()
	var total int64
	flush := func() error {
		if len(b) == 0 {
			return nil
		}
		n, err := w.Write(b)
		total += int64(n)
		b = b[:0]
		return err
	}
	for _, f := range frames {
		if len(b)+len(f) > CoalesceChunk {
			if err := flush(); err != nil {
				return total, err
			}
		}
		if len(f) >= CoalesceChunk {
			n, err := w.Write(f)
			total += int64(n)
			if err != nil {
				return total, err
			}
			continue
		}
		b = append(b, f...)
	}
	return total, flush()
}

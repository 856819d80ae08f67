package wire

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
)

// RFC 7692 permessage-deflate, the two halves the protocol needs beside
// gorilla/websocket's: gorilla compresses and inflates each message on its
// own (no context takeover), which leaves a 100-byte row hardly smaller.
// With context takeover a message may refer back to the 32 KiB of
// messages its compressor compressed before it, which is where rows that
// look alike shrink several-fold.

// rsv1Bit marks a compressed message (RFC 7692 §6).
const rsv1Bit = 0x40

// syncTail ends every sync-flushed deflate block; a compressed message is
// sent without it and the receiver adds it back (RFC 7692 §7.2.1).
var syncTail = []byte{0x00, 0x00, 0xff, 0xff}

// DeflateLevel is the compress/flate level of the server's compressors.
// BestSpeed keeps only the previous message as history once every message
// is flushed on its own, which costs most of the ratio; level 2 keeps the
// whole 32 KiB window at about the same speed on small messages.
const DeflateLevel = 2

// Deflater compresses data frames with context takeover: each frame's
// payload is compressed as one message that may refer back to every
// message this Deflater compressed since it was made or Reset. A receiver
// that got all of those, in order, inflates it (whatever else it received
// before them). It is not safe for concurrent use.
type Deflater struct {
	fw  *flate.Writer
	out appendWriter
	// Messages and In count what was compressed since the last Reset.
	Messages int
	In       int64
}

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// NewDeflater returns a Deflater with no history.
func NewDeflater() *Deflater {
	d := &Deflater{}
	d.fw, _ = flate.NewWriter(&d.out, DeflateLevel) // a valid level: no error
	return d
}

// Reset forgets the history: the next message refers to nothing before it.
func (d *Deflater) Reset() {
	d.fw.Reset(&d.out)
	d.out.b = d.out.b[:0]
	d.Messages, d.In = 0, 0
}

// DeflaterBytes is about what one Deflater holds (compress/flate's hash
// tables, window and token buffer at DeflateLevel): the figure the server
// counts per compressor.
const DeflaterBytes = 800 << 10

// AppendFrame appends frame, a complete unmasked text or binary frame
// as this package encodes them, as a compressed frame (RSV1 set). A frame
// it cannot read is appended unchanged.
func (d *Deflater) AppendFrame(dst, frame []byte) []byte {
	if len(frame) < 2 || frame[0]&0x70 != 0 || frame[1]&0x80 != 0 {
		return append(dst, frame...)
	}
	hl := frameHeaderLen(frame[1])
	if len(frame) < hl {
		return append(dst, frame...)
	}
	payload := frame[hl:]
	d.out.b = d.out.b[:0]
	_, _ = d.fw.Write(payload) // appendWriter never fails
	_ = d.fw.Flush()
	c := d.out.b
	if len(c) >= 4 && bytes.Equal(c[len(c)-4:], syncTail) {
		c = c[:len(c)-4]
	}
	d.Messages++
	d.In += int64(len(payload))
	dst = appendHeader(dst, frame[0]&0x0f|rsv1Bit, len(c))
	return append(dst, c...)
}

// Inflater inflates the messages of a connection whose server compresses
// with context takeover: it keeps the last 32 KiB it inflated as the
// history the next message may refer to. A client reading frames itself
// (a test, bench's subscribers) calls Inflate for each message whose
// first frame had RSV1 set, in order; uncompressed messages do not enter
// the history. It is not safe for concurrent use.
type Inflater struct {
	fr     io.ReadCloser
	window []byte
	in     []byte
	src    bytes.Reader
	// live says fr read every message so far as one stream and stopped
	// at a message's end: the next message continues that stream, with
	// no copy of the history into a fresh reader (which cost more than
	// inflating a row).
	live bool
}

// windowSize is deflate's history: 32 KiB.
const windowSize = 32 << 10

// ErrInflatedTooBig is returned by Inflate for a message that inflates to
// more than its limit.
var ErrInflatedTooBig = errors.New("compressed message inflates past the limit")

// Inflate returns the inflated payload of one compressed message (RSV1 set;
// payload without the 00 00 ff ff tail, as sent). limit > 0 refuses one
// that would inflate to more bytes, without inflating the rest. The result
// is valid until the next call.
func (f *Inflater) Inflate(payload []byte, limit int) ([]byte, error) {
	if len(f.window) > 4*windowSize {
		// Slide the history to the front now, not after the last call:
		// the message that call returned stays valid until this one.
		n := copy(f.window, f.window[len(f.window)-windowSize:])
		f.window = f.window[:n]
	}
	f.in = append(append(f.in[:0], payload...), syncTail...)
	f.src.Reset(f.in)
	if !f.live {
		dict := f.window[max(0, len(f.window)-windowSize):]
		if f.fr == nil {
			f.fr = flate.NewReaderDict(&f.src, dict)
		} else if err := f.fr.(flate.Resetter).Reset(&f.src, dict); err != nil {
			return nil, err
		}
		f.live = true
	}
	start := len(f.window)
	out := f.window
	for {
		if len(out) == cap(out) {
			out = append(out, make([]byte, max(4<<10, len(out)))...)[:len(out)]
		}
		room := cap(out) - len(out)
		n, err := f.fr.Read(out[len(out):cap(out)])
		out = out[:len(out)+n]
		if limit > 0 && len(out)-start > limit {
			f.window, f.live = out[:start], false
			return nil, ErrInflatedTooBig
		}
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			// A final block ended the stream, or the input ran out at
			// the start of a block: the message is complete once the
			// input is, and the next one starts a reader afresh from
			// the window.
			f.live = false
			break
		}
		if err != nil {
			f.window, f.live = out[:start], false
			return nil, fmt.Errorf("inflate a compressed message: %w", err)
		}
		if f.src.Len() == 0 && n < room {
			// The sync tail's empty stored block is read last, and
			// reading it hands out all the message's output (compress/flate
			// flushes at a stored block): with room left over, the reader
			// holds nothing more, and waits at a block's start for the
			// next message.
			break
		}
	}
	f.window = out
	return out[start:], nil
}

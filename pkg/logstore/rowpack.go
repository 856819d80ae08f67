// The encoding of a commit group's rows in buffer.db: each row a uvarint
// length then its bytes, one after another, in one blob. The reader sees
// whatever a damaged buffer.db holds, so it is fuzzed (FuzzUnpack).

package logstore

import (
	"encoding/binary"
	"errors"
)

// ErrTruncated reports a packed blob whose last length runs past its end,
// or is no uvarint: the buffer row that held it is corrupt.
var ErrTruncated = errors.New("packed rows are truncated")

// Append appends rows to dst, each as a uvarint length and its bytes, and
// returns the extended slice.
func Append(dst []byte, rows [][]byte) []byte {
	for _, r := range rows {
		dst = binary.AppendUvarint(dst, uint64(len(r)))
		dst = append(dst, r...)
	}
	return dst
}

// Reader walks the rows of a packed blob in order. The zero Reader has no
// rows; NewReader reads b.
type Reader struct {
	b []byte
}

// NewReader returns a Reader over the packed blob b. It does not copy b:
// the rows it returns are sub-slices of b.
func NewReader(b []byte) Reader {
	return Reader{b: b}
}

// Next returns the next row, or ok=false at the end of the blob. An error
// (ErrTruncated) means the blob does not parse; the Reader stays there.
// A row's capacity ends with it, so appending to it never writes over the
// next row.
func (r *Reader) Next() (row []byte, ok bool, err error) {
	if len(r.b) == 0 {
		return nil, false, nil
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 || uint64(len(r.b)-k) < n {
		return nil, false, ErrTruncated
	}
	row = r.b[k : k+int(n) : k+int(n)]
	r.b = r.b[k+int(n):]
	return row, true, nil
}

package logstore

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzUnpack feeds arbitrary bytes, as a corrupt buffer.db row would hold,
// to the Reader: it must end cleanly or report ErrTruncated, never panic or
// read past the blob. What Append wrote reads back as the same rows.
func FuzzUnpack(f *testing.F) {
	f.Add(Append(nil, [][]byte{[]byte(`{"a":1}`), []byte(`{"a":2}`)}))
	f.Add(Append(nil, [][]byte{{}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{0x05, 'a'})
	f.Fuzz(func(t *testing.T, blob []byte) {
		r := NewReader(blob)
		var rows [][]byte
		for {
			row, ok, err := r.Next()
			if err != nil {
				if !errors.Is(err, ErrTruncated) {
					t.Fatalf("error %v is not ErrTruncated", err)
				}
				return
			}
			if !ok {
				break
			}
			if cap(row) != len(row) {
				t.Fatalf("row %q has room past its end (cap %d)", row, cap(row))
			}
			rows = append(rows, row)
		}
		if again := Append(nil, rows); !bytes.Equal(again, blob) {
			// Non-minimal uvarints read fine but repack shorter; the rows
			// must still be the same.
			r2 := NewReader(again)
			for i := range rows {
				row, ok, err := r2.Next()
				if err != nil || !ok || !bytes.Equal(row, rows[i]) {
					t.Fatalf("row %d does not survive a repack", i)
				}
			}
		}
	})
}

package logstore

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzUnpack feeds arbitrary bytes, as a corrupt buffer.db row would hold,
// to the packed-group reader: it must end cleanly or report ErrCorrupt, never
// panic or read past the blob. What packRows wrote unpacks to the same rows.
func FuzzUnpack(f *testing.F) {
	f.Add(packRows(nil, [][]byte{[]byte(`{"a":1}`), []byte(`{"a":2}`)}))
	f.Add(packRows(nil, [][]byte{{}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{0x05, 'a'})
	f.Fuzz(func(t *testing.T, blob []byte) {
		u := unpacker{b: blob}
		var rows [][]byte
		for {
			row, ok, err := u.next()
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error %v is not ErrCorrupt", err)
				}
				return
			}
			if !ok {
				break
			}
			rows = append(rows, row)
		}
		if again := packRows(nil, rows); !bytes.Equal(again, blob) {
			// Non-minimal uvarints unpack fine but repack shorter; the rows
			// must still be the same.
			u2 := unpacker{b: again}
			for i := range rows {
				row, ok, err := u2.next()
				if err != nil || !ok || !bytes.Equal(row, rows[i]) {
					t.Fatalf("row %d does not survive a repack", i)
				}
			}
		}
	})
}

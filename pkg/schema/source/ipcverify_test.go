package source

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// damagedStreams returns the shapes of damage that made arrow-go allocate
// from an unverified length (issue 12): a valid IPC stream with one
// length or offset in its schema or first batch message set far past the
// message. Each is named for what it breaks.
func damagedStreams(t testing.TB, stream []byte) map[string][]byte {
	t.Helper()
	// The schema message: continuation, length, flatbuffer.
	metaLen := int64(binary.LittleEndian.Uint32(stream[4:]))
	b := fbuf(stream[8 : 8+metaLen])
	m, err := b.table(int64(b.u32(0)))
	if err != nil {
		t.Fatalf("the test's own stream: %v", err)
	}
	sc, _, err := m.optTable(msgHeader)
	if err != nil {
		t.Fatal(err)
	}
	fields, _, err := sc.vectorField(schemaFields, 4)
	if err != nil {
		t.Fatal(err)
	}
	p := fields + 4
	first, err := b.table(p + int64(b.u32(p)))
	if err != nil {
		t.Fatal(err)
	}
	name, _, err := first.vectorField(fieldName, 1)
	if err != nil {
		t.Fatal(err)
	}
	at := func(pos int64) int64 { return 8 + pos } // position in stream
	patch := func(pos int64, v uint32) []byte {
		out := bytes.Clone(stream)
		binary.LittleEndian.PutUint32(out[at(pos):], v)
		return out
	}
	return map[string][]byte{
		"field count of four billion": patch(fields, 0xFFFFFFF0),
		"field count of two billion":  patch(fields, 0x7FFFFFFF),
		"name of two billion bytes":   patch(name, 0x7FFFFFFF),
		"field table outside":         patch(p, 0x7FFFFFF0),
		"schema reference outside":    patch(m.field(msgHeader), 0xFFFFFF00),
		"vtable outside":              patch(int64(b.u32(0)), 0x80000000),
		"message root outside":        patch(0, 0xFFFFFFF0),
	}
}

// TestDamagedArrowIPCIsRefusedNotFatal: an Arrow IPC stream whose
// flatbuffer metadata claims lengths or offsets past the message is
// refused with an error naming the damage. Without the verification,
// arrow-go allocates from the field count and the test binary dies
// ("fatal error: runtime: out of memory"), which no recover catches.
func TestDamagedArrowIPCIsRefusedNotFatal(t *testing.T) {
	rec := fromJSON(t, wideSchema(), wideRows)
	defer rec.Release()
	stream, err := os.ReadFile(writeIPC(t, rec, true))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range damagedStreams(t, stream) {
		t.Run(name, func(t *testing.T) {
			if err := readToEnd(t, ArrowStream, data); !errors.Is(err, errDamagedIPC) {
				t.Fatalf("%v, want the metadata refused as damaged", err)
			}
		})
	}
}

// readToEnd reads data as one input of format f to its end: nil when it
// reads whole.
func readToEnd(t *testing.T, f Format, data []byte) error {
	t.Helper()
	p := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(mustSchema(t), []Input{{Path: p, Format: f}}, Options{BatchRows: 3})
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		rec, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rec.Release()
	}
}

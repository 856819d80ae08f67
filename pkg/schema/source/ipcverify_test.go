package source

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// damagedStreams returns the shapes of damage that made arrow-go allocate
// from an unverified length: a valid IPC stream with one
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

// TestDamagedStreamLengthsCostNoMemory: a stream of a few kilobytes whose
// message declares a metadata or body length of hundreds of megabytes is
// refused without allocating that length. arrow-go's stream reader
// allocates a declared length before it reads a byte (and applies no
// bound to the metadata's), so without readPart each of these cost the
// declared size.
func TestDamagedStreamLengthsCostNoMemory(t *testing.T) {
	rec := fromJSON(t, wideSchema(), wideRows)
	defer rec.Release()
	stream, err := os.ReadFile(writeIPC(t, rec, true))
	if err != nil {
		t.Fatal(err)
	}
	withMetaLen := func(n uint32) []byte {
		out := bytes.Clone(stream)
		binary.LittleEndian.PutUint32(out[4:], n)
		return out
	}
	// The record batch follows the schema message, which has no body.
	second := 8 + int64(binary.LittleEndian.Uint32(stream[4:]))
	meta := fbuf(stream[second+8:])
	m, err := meta.table(int64(meta.u32(0)))
	if err != nil {
		t.Fatal(err)
	}
	bodyAt := m.field(msgBodyLength)
	if bodyAt == 0 {
		t.Fatal("the test's own record batch message has no body length")
	}
	withBodyLen := bytes.Clone(stream)
	binary.LittleEndian.PutUint64(withBodyLen[second+8+bodyAt:], 900<<20)

	const bound = 16 << 20
	for name, data := range map[string][]byte{
		"metadata of 1.4 GB": withMetaLen(0x58000000),
		"metadata of 60 MB":  withMetaLen(60 << 20),
		"body of 900 MB":     withBodyLen,
	} {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := readToEnd(t, ArrowStream, data)
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatal("read whole, want it refused as damaged")
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > bound {
				t.Fatalf("reading %d bytes allocated %d MB (bound %d MB); err %v", len(data), got>>20, bound>>20, err)
			}
		})
	}
}

package source

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
)

// footerFields returns an IPC file's footer (as a verified flatbuffer),
// the file position it starts at, and the tables of the fields its schema
// declares.
func footerFields(t *testing.T, file []byte) (fbuf, int64, []fbTable) {
	t.Helper()
	size := int64(len(file))
	n := int64(binary.LittleEndian.Uint32(file[size-10:]))
	start := size - 10 - n
	b := fbuf(file[start : size-10])
	f, err := b.table(int64(b.u32(0)))
	if err != nil {
		t.Fatalf("the test's own file: %v", err)
	}
	sc, ok, err := f.optTable(footerSchema)
	if err != nil || !ok {
		t.Fatalf("the test's own file has no footer schema (%v)", err)
	}
	var fields []fbTable
	if err := sc.tables(schemaFields, func(fd fbTable) error { fields = append(fields, fd); return nil }); err != nil {
		t.Fatal(err)
	}
	return b, start, fields
}

// TestArrowFileFooterSchemaIsChecked: an Arrow IPC file is read by the
// schema its footer declares, so a footer schema that is damaged, or that
// differs from the schema message the file's stream starts with, is
// refused with an error naming the problem, never read. Without the
// check, a footer declaring n32 as int32 where the batch holds int16
// loads other values than were written.
func TestArrowFileFooterSchemaIsChecked(t *testing.T) {
	rec := fromJSON(t, wideSchema(), wideRows)
	defer rec.Release()
	good, err := os.ReadFile(writeIPC(t, rec, false))
	if err != nil {
		t.Fatal(err)
	}
	if err := readToEnd(t, ArrowFile, good); err != nil {
		t.Fatalf("the undamaged file: %v", err)
	}
	b, start, fields := footerFields(t, good)
	footer, err := b.table(int64(b.u32(0)))
	if err != nil {
		t.Fatal(err)
	}
	// Field 2 is n32 (int16), field 4 f32 (float32, nullable).
	n32, f32 := fields[2], fields[4]
	intType, ok, err := n32.optTable(fieldType)
	if err != nil || !ok {
		t.Fatalf("n32 has no type table (%v)", err)
	}
	const intBitWidth = 0 // Int: bitWidth 0, is_signed 1
	patch := func(pos int64, v []byte) []byte {
		out := append([]byte(nil), good...)
		copy(out[start+pos:], v)
		return out
	}
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	name, _, err := n32.vectorField(fieldName, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		file []byte
		want string // in the error
	}{
		{"footer declares int32 where the batch holds int16", patch(intType.field(intBitWidth), u32(32)),
			`column 3 as n32: type=int32, its first message as n32: type=int16`},
		{"footer declares a nullable column non-nullable", patch(f32.field(1), []byte{0}),
			`column 5 as f32: type=float32, its first message as f32: type=float32, nullable`},
		{"footer schema's field name of two billion bytes", patch(name, u32(0x7FFFFFFF)),
			`claims 2147483647 elements`},
		{"footer's schema reference outside", patch(footer.field(footerSchema), u32(0xFFFFFF00)),
			`points outside`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := readToEnd(t, ArrowFile, tc.file)
			if !errors.Is(err, errDamagedIPC) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v; want the file refused as damaged, saying %q", err, tc.want)
			}
		})
	}
}

package source

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// arrow-go decodes an IPC message's flatbuffer without verifying it, and
// sizes slices from the lengths it finds there: a damaged schema whose
// field count reads as four billion makes it allocate hundreds of
// gigabytes, which kills the process rather than failing. So every
// message's flatbuffer is checked here first: each table, vtable, string
// and vector lies inside the message, and a vector's length fits in what
// is left of it (so no slice made from it is larger than the message).
// The layouts are those of the Arrow format's Message.fbs, Schema.fbs and
// File.fbs.

// Field numbers (vtable slots) of the tables read below.
const (
	msgHeaderType = 1 // Message: version 0, header_type 1, header 2, bodyLength 3, custom_metadata 4
	msgHeader     = 2
	msgBodyLength = 3
	msgMetadata   = 4

	headerSchema     = 1 // MessageHeader union
	headerDictionary = 2
	headerRecord     = 3

	schemaFields   = 1 // Schema: endianness 0, fields 1, custom_metadata 2, features 3
	schemaMetadata = 2
	schemaFeatures = 3

	fieldName       = 0 // Field: name 0, nullable 1, type_type 2, type 3, dictionary 4, children 5, custom_metadata 6
	fieldTypeType   = 2
	fieldType       = 3
	fieldDictionary = 4
	fieldChildren   = 5
	fieldMetadata   = 6

	typeTimestamp = 10 // Type union members with references
	typeUnion     = 14

	recordNodes    = 1 // RecordBatch: length 0, nodes 1, buffers 2, compression 3, variadicBufferCounts 4
	recordBuffers  = 2
	recordCompress = 3
	recordVariadic = 4

	dictData = 1 // DictionaryBatch: id 0, data 1, isDelta 2

	footerSchema       = 1 // Footer: version 0, schema 1, dictionaries 2, recordBatches 3, custom_metadata 4
	footerDictionaries = 2
	footerRecords      = 3
	footerMetadata     = 4

	maxNesting = 64 // nested fields a schema may declare
)

// errDamagedIPC is wrapped by every refusal of a message's metadata.
var errDamagedIPC = errors.New("the Arrow IPC metadata is damaged")

// fbuf is one flatbuffer being verified.
type fbuf []byte

func (b fbuf) fail(what string, args ...any) error {
	return fmt.Errorf("%w: %s", errDamagedIPC, fmt.Sprintf(what, args...))
}

// span reports whether [pos, pos+n) lies in b.
func (b fbuf) span(pos, n int64) bool { return pos >= 0 && n >= 0 && pos+n <= int64(len(b)) }

func (b fbuf) u16(pos int64) uint16 { return binary.LittleEndian.Uint16(b[pos:]) }
func (b fbuf) u32(pos int64) uint32 { return binary.LittleEndian.Uint32(b[pos:]) }

// fbTable is a verified table: its position, vtable and inline size.
type fbTable struct {
	b              fbuf
	pos, vt        int64
	vtSize, tbSize int64
}

// table verifies the table at pos.
func (b fbuf) table(pos int64) (fbTable, error) {
	if !b.span(pos, 4) {
		return fbTable{}, b.fail("a table at %d lies outside the %d-byte message", pos, len(b))
	}
	vt := pos - int64(int32(b.u32(pos)))
	if !b.span(vt, 4) {
		return fbTable{}, b.fail("the vtable of the table at %d lies outside the message", pos)
	}
	t := fbTable{b: b, pos: pos, vt: vt, vtSize: int64(b.u16(vt)), tbSize: int64(b.u16(vt + 2))}
	if t.vtSize < 4 || t.vtSize%2 != 0 || !b.span(vt, t.vtSize) || t.tbSize < 4 || !b.span(pos, t.tbSize) {
		return fbTable{}, b.fail("the table at %d has a vtable of %d bytes for %d inline bytes, not inside the message", pos, t.vtSize, t.tbSize)
	}
	for slot := int64(4); slot < t.vtSize; slot += 2 {
		if off := int64(b.u16(vt + slot)); off != 0 && off >= t.tbSize {
			return fbTable{}, b.fail("a field of the table at %d lies past its end", pos)
		}
	}
	return t, nil
}

// field returns the position of field i, or 0 when the table has none.
func (t fbTable) field(i int) int64 {
	slot := 4 + 2*int64(i)
	if slot >= t.vtSize {
		return 0
	}
	if off := int64(t.b.u16(t.vt + slot)); off != 0 {
		return t.pos + off
	}
	return 0
}

// scalar checks that field i, when present, holds size bytes inside the
// message.
func (t fbTable) scalar(i int, size int64) error {
	if p := t.field(i); p != 0 && !t.b.span(p, size) {
		return t.b.fail("a field of the table at %d runs past the message", t.pos)
	}
	return nil
}

// byteField returns field i as one byte (0 when absent).
func (t fbTable) byteField(i int) (byte, error) {
	if err := t.scalar(i, 1); err != nil {
		return 0, err
	}
	if p := t.field(i); p != 0 {
		return t.b[p], nil
	}
	return 0, nil
}

// ref follows the offset in field i; ok=false when the field is absent.
func (t fbTable) ref(i int) (target int64, ok bool, err error) {
	p := t.field(i)
	if p == 0 {
		return 0, false, nil
	}
	if !t.b.span(p, 4) {
		return 0, false, t.b.fail("a reference in the table at %d runs past the message", t.pos)
	}
	target = p + int64(t.b.u32(p))
	if !t.b.span(target, 4) {
		return 0, false, t.b.fail("a reference in the table at %d points outside the message", t.pos)
	}
	return target, true, nil
}

// vector verifies the vector (or string) at pos of elements of size
// bytes and returns its length.
func (b fbuf) vector(pos, size int64) (int64, error) {
	if !b.span(pos, 4) {
		return 0, b.fail("a vector at %d lies outside the message", pos)
	}
	n := int64(b.u32(pos))
	if !b.span(pos+4, n*size) {
		return 0, b.fail("a vector at %d claims %d elements, more than the %d-byte message holds", pos, n, len(b))
	}
	return n, nil
}

// vectorField verifies the vector in field i (absent: length 0).
func (t fbTable) vectorField(i int, size int64) (pos, n int64, err error) {
	pos, ok, err := t.ref(i)
	if err != nil || !ok {
		return 0, 0, err
	}
	n, err = t.b.vector(pos, size)
	return pos, n, err
}

// tables verifies the vector of tables in field i and calls each on
// every element.
func (t fbTable) tables(i int, each func(fbTable) error) error {
	pos, n, err := t.vectorField(i, 4)
	if err != nil {
		return err
	}
	for k := range n {
		p := pos + 4 + 4*k
		el, err := t.b.table(p + int64(t.b.u32(p)))
		if err != nil {
			return err
		}
		if err := each(el); err != nil {
			return err
		}
	}
	return nil
}

// optTable verifies the table in field i, when there is one.
func (t fbTable) optTable(i int) (fbTable, bool, error) {
	pos, ok, err := t.ref(i)
	if err != nil || !ok {
		return fbTable{}, false, err
	}
	sub, err := t.b.table(pos)
	return sub, err == nil, err
}

func verifyKeyValues(t fbTable, i int) error {
	return t.tables(i, func(kv fbTable) error {
		for _, f := range []int{0, 1} { // key, value
			if _, _, err := kv.vectorField(f, 1); err != nil {
				return err
			}
		}
		return nil
	})
}

func verifySchema(s fbTable) error {
	if _, _, err := s.vectorField(schemaFeatures, 8); err != nil {
		return err
	}
	if err := verifyKeyValues(s, schemaMetadata); err != nil {
		return err
	}
	return s.tables(schemaFields, func(f fbTable) error { return verifyField(f, 1) })
}

func verifyField(f fbTable, depth int) error {
	if depth > maxNesting {
		return f.b.fail("the schema nests fields more than %d deep", maxNesting)
	}
	if _, _, err := f.vectorField(fieldName, 1); err != nil {
		return err
	}
	kind, err := f.byteField(fieldTypeType)
	if err != nil {
		return err
	}
	if typ, ok, err := f.optTable(fieldType); err != nil {
		return err
	} else if ok {
		switch kind {
		case typeTimestamp: // unit 0, timezone 1
			if _, _, err := typ.vectorField(1, 1); err != nil {
				return err
			}
		case typeUnion: // mode 0, typeIds 1
			if _, _, err := typ.vectorField(1, 4); err != nil {
				return err
			}
		}
	}
	if dict, ok, err := f.optTable(fieldDictionary); err != nil {
		return err
	} else if ok {
		if _, _, err := dict.optTable(1); err != nil { // indexType
			return err
		}
	}
	if err := verifyKeyValues(f, fieldMetadata); err != nil {
		return err
	}
	return f.tables(fieldChildren, func(c fbTable) error { return verifyField(c, depth+1) })
}

// verifyRecord checks a RecordBatch's vectors, and that every buffer
// lies inside the message's body of bodyLen bytes.
func verifyRecord(r fbTable, bodyLen int64) error {
	if _, _, err := r.vectorField(recordNodes, 16); err != nil {
		return err
	}
	pos, n, err := r.vectorField(recordBuffers, 16)
	if err != nil {
		return err
	}
	for k := range n {
		p := pos + 4 + 16*k
		off, size := int64(binary.LittleEndian.Uint64(r.b[p:])), int64(binary.LittleEndian.Uint64(r.b[p+8:]))
		if off < 0 || size < 0 || off > bodyLen || size > bodyLen-off {
			return r.b.fail("buffer %d of a record batch, %d bytes at %d, lies outside its %d-byte body", k, size, off, bodyLen)
		}
	}
	if _, _, err := r.optTable(recordCompress); err != nil {
		return err
	}
	_, _, err = r.vectorField(recordVariadic, 8)
	return err
}

// verifyMessage checks one IPC message's metadata flatbuffer and returns
// its body length.
func verifyMessage(meta []byte) (bodyLen int64, err error) {
	b := fbuf(meta)
	if !b.span(0, 4) {
		return 0, b.fail("a message of %d bytes", len(meta))
	}
	m, err := b.table(int64(b.u32(0)))
	if err != nil {
		return 0, err
	}
	if err := m.scalar(msgBodyLength, 8); err != nil {
		return 0, err
	}
	if p := m.field(msgBodyLength); p != 0 {
		bodyLen = int64(binary.LittleEndian.Uint64(b[p:]))
	}
	if bodyLen < 0 {
		return 0, b.fail("a message body of %d bytes", bodyLen)
	}
	if err := verifyKeyValues(m, msgMetadata); err != nil {
		return 0, err
	}
	kind, err := m.byteField(msgHeaderType)
	if err != nil {
		return 0, err
	}
	h, ok, err := m.optTable(msgHeader)
	if err != nil || !ok {
		return bodyLen, err
	}
	switch kind {
	case headerSchema:
		err = verifySchema(h)
	case headerRecord:
		err = verifyRecord(h, bodyLen)
	case headerDictionary:
		var r fbTable
		if r, ok, err = h.optTable(dictData); err == nil && ok {
			err = verifyRecord(r, bodyLen)
		}
	}
	return bodyLen, err
}

// verifyFooter checks an IPC file's footer flatbuffer, and that every
// block it lists lies inside the file of size bytes.
func verifyFooter(footer []byte, size int64) ([]ipcBlock, error) {
	b := fbuf(footer)
	if !b.span(0, 4) {
		return nil, b.fail("a footer of %d bytes", len(footer))
	}
	f, err := b.table(int64(b.u32(0)))
	if err != nil {
		return nil, err
	}
	if s, ok, err := f.optTable(footerSchema); err != nil {
		return nil, err
	} else if ok {
		if err := verifySchema(s); err != nil {
			return nil, err
		}
	}
	if err := verifyKeyValues(f, footerMetadata); err != nil {
		return nil, err
	}
	var blocks []ipcBlock
	for _, i := range []int{footerDictionaries, footerRecords} {
		pos, n, err := f.vectorField(i, 24) // Block: offset int64, metaDataLength int32, pad, bodyLength int64
		if err != nil {
			return nil, err
		}
		for k := range n {
			p := pos + 4 + 24*k
			bl := ipcBlock{off: int64(binary.LittleEndian.Uint64(b[p:])), meta: int64(int32(b.u32(p + 8))), body: int64(binary.LittleEndian.Uint64(b[p+16:]))}
			if bl.off < 0 || bl.meta < 8 || bl.body < 0 || bl.off > size || bl.meta > size-bl.off || bl.body > size-bl.off-bl.meta {
				return nil, b.fail("a block of %d+%d bytes at %d lies outside the %d-byte file", bl.meta, bl.body, bl.off, size)
			}
			blocks = append(blocks, bl)
		}
	}
	return blocks, nil
}

// ipcBlock is where an IPC file's footer says a message is.
type ipcBlock struct{ off, meta, body int64 }

// verifyIPCFile checks an IPC file's footer and the metadata of every
// message it lists before arrow-go reads any of them.
func verifyIPCFile(r io.ReaderAt, size int64) error {
	const tail = 10 // int32 footer length + "ARROW1"
	if size < 8+tail {
		return fmt.Errorf("%w: a file of %d bytes is too short for an Arrow IPC file", errDamagedIPC, size)
	}
	var lenBuf [4]byte
	if _, err := r.ReadAt(lenBuf[:], size-tail); err != nil {
		return err
	}
	n := int64(int32(binary.LittleEndian.Uint32(lenBuf[:])))
	if n <= 0 || n > size-8-tail {
		return fmt.Errorf("%w: a footer of %d bytes in a file of %d", errDamagedIPC, n, size)
	}
	footer := make([]byte, n)
	if _, err := r.ReadAt(footer, size-tail-n); err != nil {
		return err
	}
	blocks, err := verifyFooter(footer, size)
	if err != nil {
		return err
	}
	for _, bl := range blocks {
		meta := make([]byte, bl.meta)
		if _, err := r.ReadAt(meta, bl.off); err != nil {
			return err
		}
		// The block's metadata starts with the continuation marker and the
		// length, as in a stream.
		m, err := messageMeta(meta)
		if err != nil {
			return err
		}
		body, err := verifyMessage(m)
		if err != nil {
			return err
		}
		if body > bl.body {
			return fmt.Errorf("%w: a message's body of %d bytes is longer than its block's %d", errDamagedIPC, body, bl.body)
		}
	}
	return nil
}

// messageMeta strips a message's prefix (the continuation marker, when
// present, and the length) from meta.
func messageMeta(meta []byte) ([]byte, error) {
	if len(meta) >= 4 && binary.LittleEndian.Uint32(meta) == ipcContinuation {
		meta = meta[4:]
	}
	if len(meta) < 4 {
		return nil, fmt.Errorf("%w: a message prefix of %d bytes", errDamagedIPC, len(meta))
	}
	n := int64(int32(binary.LittleEndian.Uint32(meta)))
	if n < 0 || n > int64(len(meta)-4) {
		return nil, fmt.Errorf("%w: a message of %d bytes in a block of %d", errDamagedIPC, n, len(meta))
	}
	return meta[4 : 4+n], nil
}

const ipcContinuation = 0xFFFFFFFF

// verifiedStream passes an IPC stream through, holding each message's
// metadata back until it is verified, so arrow-go's reader never sees an
// unverified flatbuffer.
type verifiedStream struct {
	r       io.Reader
	pending []byte // verified metadata not yet handed out
	body    []byte // the body that follows it, read whole
	done    bool   // end of stream (its marker, or a clean EOF) passed on
	err     error
}

// maxIPCMetadata bounds one message's metadata, as arrow-go's file
// reader does by default (64 MiB).
const maxIPCMetadata = 64 << 20

func (v *verifiedStream) Read(p []byte) (int, error) {
	for len(v.pending) == 0 && len(v.body) == 0 {
		if v.err != nil {
			return 0, v.err
		}
		if v.done {
			return v.r.Read(p) // past the end marker: whatever follows, unread by arrow-go
		}
		v.err = v.next()
	}
	if len(v.pending) > 0 {
		n := copy(p, v.pending)
		v.pending = v.pending[n:]
		return n, nil
	}
	n := copy(p, v.body)
	v.body = v.body[n:]
	return n, nil
}

// next reads and verifies the next message's prefix and metadata.
func (v *verifiedStream) next() error {
	var word [4]byte
	if _, err := io.ReadFull(v.r, word[:]); err != nil {
		if errors.Is(err, io.EOF) {
			v.done = true
			return io.EOF
		}
		return err
	}
	prefix := append([]byte(nil), word[:]...)
	n := binary.LittleEndian.Uint32(word[:])
	if n == ipcContinuation {
		if _, err := io.ReadFull(v.r, word[:]); err != nil {
			v.pending = prefix
			return nil // arrow-go reports the short read
		}
		prefix = append(prefix, word[:]...)
		n = binary.LittleEndian.Uint32(word[:])
	}
	if n == 0 || int32(n) < 4 {
		// The end marker, or a length arrow-go refuses itself.
		v.pending, v.done = prefix, true
		return nil
	}
	if n > maxIPCMetadata {
		// arrow-go's stream reader does not apply its own bound: it
		// would allocate the length before reading a byte.
		return fmt.Errorf("%w: a message's metadata of %d bytes is more than the %d a message may have", errDamagedIPC, n, maxIPCMetadata)
	}
	// Neither the metadata nor the body is allocated at its declared
	// length: arrow-go does that before it reads a byte, so a damaged
	// length made a stream of a few bytes cost up to a gigabyte. Both are
	// read here first, into memory that grows only as their bytes arrive,
	// and passed on only when all of them are there.
	meta, err := readPart(v.r, int64(n), "metadata")
	if err != nil {
		return err
	}
	bodyLen, err := verifyMessage(meta)
	if err != nil {
		return err
	}
	if bodyLen > maxBuffer {
		// arrow-go would ask the allocator for it whole, and be refused.
		return errTooLarge(bodyLen)
	}
	body, err := readPart(v.r, bodyLen, "body")
	if err != nil {
		return err
	}
	v.pending, v.body = append(prefix, meta...), body
	return nil
}

// readPart reads the n bytes of a message's part (what) from r into a
// buffer that grows with the bytes read, not with n.
func readPart(r io.Reader, n int64, what string) ([]byte, error) {
	var b bytes.Buffer
	got, err := b.ReadFrom(io.LimitReader(r, n))
	if err != nil {
		return nil, err
	}
	if got < n {
		return nil, fmt.Errorf("%w: a message's %s is cut short: it declares %d bytes and the stream ends after %d", errDamagedIPC, what, n, got)
	}
	return b.Bytes(), nil
}

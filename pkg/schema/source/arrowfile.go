package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/streamcast/streamcast/pkg/schema"
)

// recordSource yields a file's record batches as the file has them.
type recordSource interface {
	read() (arrow.RecordBatch, error) // io.EOF at the end
	close() error
}

// arrowReader checks and converts the batches of a Parquet or Arrow file.
type arrowReader struct {
	p    *plan
	src  recordSource
	rows int64             // rows read or skipped
	held arrow.RecordBatch // the rest of a batch a skip cut into
}

func newArrowReader(sch *schema.Schema, sc *arrow.Schema, src recordSource) (*arrowReader, error) {
	p, err := planColumns(sch, sc)
	if err != nil {
		src.close()
		return nil, err
	}
	return &arrowReader{p: p, src: src}, nil
}

func (r *arrowReader) read() (rec arrow.RecordBatch, err error) {
	if r.held != nil {
		rec, r.held = r.held, nil
		return rec, nil
	}
	defer recovered(&err)
	for {
		rec, err = r.src.read()
		if err != nil {
			return nil, err
		}
		if rec.NumRows() == 0 {
			rec.Release()
			continue
		}
		// Nothing reads a value before the batch's shape is known
		// good (shape.go).
		if err := checkBatch(rec); err != nil {
			rec.Release()
			return nil, err
		}
		return rec, nil
	}
}

func (r *arrowReader) next(ctx context.Context) (arrow.RecordBatch, error) {
	rec, err := r.read()
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	out, err := r.p.convert(rec)
	if err != nil {
		var re *RefusedError
		if errors.As(err, &re) && re.Row > 0 {
			re.Row += r.rows
		}
		return nil, err
	}
	r.rows += rec.NumRows()
	return out, nil
}

func (r *arrowReader) skip(n int64) (int64, error) {
	var done int64
	for done < n {
		rec, err := r.read()
		if errors.Is(err, io.EOF) {
			return done, nil
		}
		if err != nil {
			return done, err
		}
		k := rec.NumRows()
		if done+k > n {
			take := n - done
			r.held = rec.NewSlice(take, k)
			rec.Release()
			done += take
			r.rows += take
			break
		}
		rec.Release()
		done += k
		r.rows += k
	}
	return done, nil
}

func (r *arrowReader) row() int64  { return r.rows }
func (r *arrowReader) line() int64 { return 0 }
func (r *arrowReader) close() error {
	if r.held != nil {
		r.held.Release()
		r.held = nil
	}
	return r.src.close()
}

// parquetSource reads a Parquet file a row group at a time, in batches.
type parquetSource struct {
	pf     *file.Reader
	fr     *pqarrow.FileReader
	rr     pqarrow.RecordReader
	groups []int // row groups left to read
	c      io.Closer
}

const parquetBatch = 1 << 16

func openParquet(sch *schema.Schema, rs readSource) (_ batchReader, err error) {
	defer recovered(&err)
	pf, err := file.NewParquetReader(rs.f)
	if err != nil {
		return nil, fmt.Errorf("not a readable Parquet file: %w", err)
	}
	fi, err := rs.f.f.Stat()
	if err != nil {
		pf.Close()
		return nil, err
	}
	if err := checkColumnChunks(pf, fi.Size()); err != nil {
		pf.Close()
		return nil, fmt.Errorf("not a readable Parquet file: %w", err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: parquetBatch, Parallel: false}, alloc)
	if err != nil {
		pf.Close()
		return nil, err
	}
	sc, err := fr.Schema()
	if err != nil {
		pf.Close()
		return nil, err
	}
	ps := &parquetSource{pf: pf, fr: fr, c: rs.c}
	for i := range pf.NumRowGroups() {
		ps.groups = append(ps.groups, i)
	}
	ar, err := newArrowReader(sch, sc, ps)
	if err != nil {
		return nil, err
	}
	return &parquetReader{arrowReader: ar, ps: ps}, nil
}

// checkColumnChunks checks that every column chunk the footer lists lies
// inside the file of size bytes. arrow-go allocates a chunk's declared
// length before reading it, and does so for a struct's fields on
// goroutines of its own, where a damaged length's panic (or an allocation
// of any size) is beyond recovered's reach: a footer of a few bytes could
// kill the process.
func checkColumnChunks(pf *file.Reader, size int64) error {
	md := pf.MetaData()
	for g := range md.NumRowGroups() {
		rg := md.RowGroup(g)
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				return err
			}
			// Where arrow-go starts reading the chunk (row_group_reader.go).
			start := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && start > cc.DictionaryPageOffset() {
				start = cc.DictionaryPageOffset()
			}
			n := cc.TotalCompressedSize()
			if start < 0 || n < 0 || start > size || n > size-start {
				return fmt.Errorf("the footer is damaged: row group %d's column %d claims %d bytes at offset %d of a file of %d bytes", g, c, n, start, size)
			}
		}
	}
	return nil
}

func (s *parquetSource) read() (arrow.RecordBatch, error) {
	for {
		if s.rr == nil {
			if len(s.groups) == 0 {
				return nil, io.EOF
			}
			rr, err := s.fr.GetRecordReader(context.Background(), nil, s.groups[:1])
			if err != nil {
				return nil, err
			}
			s.groups = s.groups[1:]
			s.rr = rr
		}
		rec, err := s.rr.Read()
		if err == nil {
			return rec, nil
		}
		if !errors.Is(err, io.EOF) {
			return nil, err
		}
		s.rr.Release()
		s.rr = nil
	}
}

// skipGroups passes over whole row groups within n rows, from the footer.
func (s *parquetSource) skipGroups(n int64) int64 {
	var done int64
	for s.rr == nil && len(s.groups) > 0 {
		k := s.pf.MetaData().RowGroup(s.groups[0]).NumRows()
		if done+k > n {
			break
		}
		done += k
		s.groups = s.groups[1:]
	}
	return done
}

func (s *parquetSource) close() error {
	if s.rr != nil {
		s.rr.Release()
		s.rr = nil
	}
	s.pf.Close()
	return s.c.Close()
}

// parquetReader skips whole row groups by the footer before reading.
type parquetReader struct {
	*arrowReader
	ps *parquetSource
}

func (r *parquetReader) skip(n int64) (int64, error) {
	done := int64(0)
	if r.held == nil {
		done = r.ps.skipGroups(n)
		r.rows += done
	}
	more, err := r.arrowReader.skip(n - done)
	return done + more, err
}

// ipcFileSource reads an Arrow IPC file's batches in order.
type ipcFileSource struct {
	r *ipc.FileReader
	i int
	c io.Closer
}

func openArrowFile(sch *schema.Schema, rs readSource) (_ batchReader, err error) {
	defer recovered(&err)
	var magic [6]byte
	if _, err := rs.f.ReadAt(magic[:], 0); err != nil || !bytes.Equal(magic[:], []byte("ARROW1")) {
		// An .arrow file holding a stream: read it as one.
		if _, err := rs.f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		return openArrowStream(sch, readSource{r: rs.f, c: rs.c})
	}
	// arrow-go trusts the footer and every message's flatbuffer: check
	// them first (ipcverify.go). Read beside the progress count.
	fi, err := rs.f.f.Stat()
	if err != nil {
		return nil, err
	}
	if err := verifyIPCFile(rs.f.f, fi.Size()); err != nil {
		return nil, fmt.Errorf("not a readable Arrow IPC file: %w", err)
	}
	fr, err := ipc.NewFileReader(rs.f, ipc.WithAllocator(alloc))
	if err != nil {
		return nil, fmt.Errorf("not a readable Arrow IPC file: %w", err)
	}
	if err := sameSchemaAsStream(fr.Schema(), rs.f.f, fi.Size()); err != nil {
		fr.Close()
		return nil, fmt.Errorf("not a readable Arrow IPC file: %w", err)
	}
	return newArrowReader(sch, fr.Schema(), &ipcFileSource{r: fr, c: rs.c})
}

// sameSchemaAsStream checks that the schema an IPC file's footer declares
// (the one arrow-go reads its batches by) is the schema of the stream the
// file wraps, in its first message. A footer that says int32 where the
// batches hold int16 would otherwise load other values than were written.
func sameSchemaAsStream(footer *arrow.Schema, f io.ReaderAt, size int64) error {
	// The stream starts after the magic and its padding ("ARROW1\0\0").
	const start = 8
	r, err := ipc.NewReader(&verifiedStream{r: io.NewSectionReader(f, start, size-start)}, ipc.WithAllocator(alloc))
	if err != nil {
		return fmt.Errorf("its first message is not a schema: %w", err)
	}
	defer r.Release()
	msg := r.Schema()
	if footer.Equal(msg) {
		return nil
	}
	if a, b := footer.NumFields(), msg.NumFields(); a != b {
		return fmt.Errorf("%w: its footer declares %d columns, its first message %d", errDamagedIPC, a, b)
	}
	for i, fd := range footer.Fields() {
		if m := msg.Field(i); !fd.Equal(m) {
			return fmt.Errorf("%w: its footer declares column %d as %s, its first message as %s", errDamagedIPC, i+1, fd, m)
		}
	}
	return fmt.Errorf("%w: its footer declares another schema than its first message", errDamagedIPC)
}

func (s *ipcFileSource) read() (arrow.RecordBatch, error) {
	if s.i >= s.r.NumRecords() {
		return nil, io.EOF
	}
	rec, err := s.r.RecordBatch(s.i)
	if err != nil {
		return nil, err
	}
	s.i++
	return rec, nil // RecordBatch returns a batch the caller owns
}

func (s *ipcFileSource) close() error {
	s.r.Close()
	return s.c.Close()
}

// ipcStreamSource reads an Arrow IPC stream.
type ipcStreamSource struct {
	r *ipc.Reader
	c io.Closer
}

func openArrowStream(sch *schema.Schema, rs readSource) (_ batchReader, err error) {
	defer recovered(&err)
	// Each message's flatbuffer is verified before arrow-go reads it
	// (ipcverify.go).
	r, err := ipc.NewReader(&verifiedStream{r: rs.r}, ipc.WithAllocator(alloc))
	if err != nil {
		return nil, fmt.Errorf("not a readable Arrow IPC stream: %w", err)
	}
	c := rs.c
	if c == nil {
		c = io.NopCloser(nil)
	}
	return newArrowReader(sch, r.Schema(), &ipcStreamSource{r: r, c: c})
}

func (s *ipcStreamSource) read() (arrow.RecordBatch, error) {
	if !s.r.Next() {
		if err := s.r.Err(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	rec := s.r.RecordBatch()
	rec.Retain()
	return rec, nil
}

func (s *ipcStreamSource) close() error {
	s.r.Release()
	return s.c.Close()
}

package parquetfile

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Source remembers the first I/O error of the reader underneath,
// so a failure to fetch bytes (a network error) is reported as such rather
// than as the corrupt file the decoder would then see. For a remote file it
// also holds one prefetched span (a row group), so the decoder's reads of
// each column chunk cost no request of their own.
type Source struct {
	r interface {
		io.ReaderAt
		io.Seeker
	}
	err    error
	bufOff int64
	buf    []byte
}

// NewSource wraps r, the bytes of a Parquet file.
func NewSource(r interface {
	io.ReaderAt
	io.Seeker
}) *Source {
	return &Source{r: r}
}

// Err returns the first I/O error of the reader underneath, nil if none.
func (c *Source) Err() error { return c.err }

// Prefetch reads [off, off+n) in one request and serves reads inside it
// from memory until the next Prefetch.
func (c *Source) Prefetch(off, n int64) {
	c.buf = c.buf[:0]
	if n <= 0 || n > 1<<30 {
		return
	}
	b := make([]byte, n)
	k, err := c.r.ReadAt(b, off)
	if err != nil && !(errors.Is(err, io.EOF) && int64(k) == n) {
		return // the reads that need these bytes will fail and say why
	}
	c.bufOff, c.buf = off, b
}

// ReadAt reads from the prefetched span when it holds p, else from the
// reader underneath, remembering its first error.
func (c *Source) ReadAt(p []byte, off int64) (int, error) {
	if len(c.buf) > 0 && off >= c.bufOff && off+int64(len(p)) <= c.bufOff+int64(len(c.buf)) {
		return copy(p, c.buf[off-c.bufOff:]), nil
	}
	n, err := c.r.ReadAt(p, off)
	if err != nil && !errors.Is(err, io.EOF) && c.err == nil {
		c.err = err
	}
	return n, err
}

// Seek seeks the reader underneath, remembering its first error.
func (c *Source) Seek(off int64, whence int) (int64, error) {
	n, err := c.r.Seek(off, whence)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

var _ parquet.ReaderAtSeeker = (*Source)(nil)

// GroupSpan returns the byte range of a row group's column chunks.
func GroupSpan(rg *metadata.RowGroupMetaData) (off, n int64) {
	lo, hi := int64(-1), int64(0)
	for j := range rg.NumColumns() {
		cc, err := rg.ColumnChunk(j)
		if err != nil {
			return 0, 0
		}
		start := cc.DataPageOffset()
		if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 {
			start = min(start, cc.DictionaryPageOffset())
		}
		if lo < 0 || start < lo {
			lo = start
		}
		hi = max(hi, start+cc.TotalCompressedSize())
	}
	if lo < 0 {
		return 0, 0
	}
	return lo, hi - lo
}

// MinMaxInt64 returns the smallest and largest value of the int64 column
// col of a row group, from its footer statistics: for streamcast_offset,
// which every file streamcast writes keeps them for, its offset range.
func MinMaxInt64(rg *metadata.RowGroupMetaData, col int) (lo, hi int64, err error) {
	cc, err := rg.ColumnChunk(col)
	if err != nil {
		return 0, 0, err
	}
	st, err := cc.Statistics()
	if err != nil {
		return 0, 0, err
	}
	is, ok := st.(*metadata.Int64Statistics)
	if !ok || !is.HasMinMax() {
		return 0, 0, fmt.Errorf("its %s column has no min/max statistics", rg.Schema.Column(col).Name())
	}
	return is.Min(), is.Max(), nil
}

// NewReader opens the Parquet file r holds, reporting a decoder panic
// on a damaged footer as an error.
func NewReader(r parquet.ReaderAtSeeker) (rdr *file.Reader, err error) {
	// A damaged footer can trip a panic deep in a decoder; it must surface
	// as an error naming the file, never take the process down.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("decoding the footer failed: %v", p)
		}
	}()
	return file.NewParquetReader(r)
}

// ReadRowGroup reads every column of row group i, reporting a decoder
// panic on a damaged file as an error.
func ReadRowGroup(ctx context.Context, ar *pqarrow.FileReader, i int) (tbl arrow.Table, err error) {
	// A damaged file can trip a panic deep in a decoder; it must surface
	// as an error naming the file, never take the process down.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoding failed: %v", r)
		}
	}()
	cols := make([]int, ar.ParquetReader().MetaData().Schema.NumColumns())
	for c := range cols {
		cols[c] = c
	}
	return ar.ReadRowGroups(ctx, cols, []int{i})
}

// SameSchema checks that a file's columns are the ones expected (want).
func SameSchema(got, want *arrow.Schema) error {
	if got.NumFields() != want.NumFields() {
		return fmt.Errorf("it has %d columns where %d were expected", got.NumFields(), want.NumFields())
	}
	for i := range want.NumFields() {
		g, w := got.Field(i), want.Field(i)
		if g.Name != w.Name || !arrow.TypeEqual(g.Type, w.Type) {
			return fmt.Errorf("column %d is %s %s where %s %s was expected", i, g.Name, g.Type, w.Name, w.Type)
		}
	}
	return nil
}

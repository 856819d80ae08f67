package parquetfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/streamcast/streamcast/internal/durable"
)

// Write writes rec to path (which must not exist) as zstd Parquet in
// one row group, with the Arrow schema stored so every type reads back
// exactly, and fsyncs the file and its directory. It returns the file size.
func Write(path string, rec arrow.RecordBatch) (int64, error) {
	w, err := Create(path, rec.Schema())
	if err != nil {
		return 0, err
	}
	if err := w.WriteGroup(rec); err != nil {
		w.Abort()
		return 0, err
	}
	return w.Close()
}

// Writer writes one Parquet file a row group at a time, with the
// properties every file of a log has (zstd, statistics, no dictionaries,
// the Arrow schema stored), and makes it durable on Close. Seal writes one
// row group per file; ingest streams many into a file of the compaction
// target, holding one row group in memory at a time.
type Writer struct {
	path string
	sc   *arrow.Schema
	f    *os.File
	cw   countingWriter
	bw   *bufio.Writer
	fw   *pqarrow.FileWriter
	cc   *columnsWriter // instead of fw: the columns are encoded concurrently
}

// countingWriter counts the bytes that reached the file's buffer.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Create creates path (which must not exist) for a file of schema sc.
func Create(path string, sc *arrow.Schema) (*Writer, error) {
	return CreateConcurrent(path, sc, 1)
}

// CreateConcurrent is Create with each row group's columns encoded and
// compressed by up to workers goroutines at once, when every column of
// sc is flat (no struct, list or map): a bulk load then keeps more than
// one core busy. The file is the one Create writes, byte for byte
// (TestConcurrentWriterWritesTheSameFile). A schema with a nested column
// is written by one goroutine, as Create does.
func CreateConcurrent(path string, sc *arrow.Schema, workers int) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	w := &Writer{path: path, sc: sc, f: f}
	w.cw.w = f
	w.bw = bufio.NewWriterSize(&w.cw, 1<<20)
	props := writerProperties()
	aprops := pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())
	if workers > 1 && allFlat(sc) {
		w.cc, err = newColumnsWriter(sc, w.bw, props, aprops, workers)
	} else {
		w.fw, err = pqarrow.NewFileWriter(sc, w.bw, props, aprops)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// writerProperties are the Parquet properties of every file of a log.
func writerProperties() *parquet.WriterProperties {
	return parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCompressionLevel(1),
		// Each WriteGroup call is one row group, whatever its length.
		parquet.WithMaxRowGroupLength(1<<62),
		parquet.WithStats(true),
		parquet.WithDictionaryDefault(false),
	)
}

// WriteGroup writes rec as one row group.
func (w *Writer) WriteGroup(rec arrow.RecordBatch) error {
	if w.cc != nil {
		return w.cc.writeGroup(rec)
	}
	return w.fw.Write(rec)
}

// Size returns the bytes written so far, footer excluded: about the
// file's size once closed.
func (w *Writer) Size() int64 { return w.cw.n + int64(w.bw.Buffered()) }

// Close writes the footer, fsyncs the file and its directory, and
// returns the file's size. After an error the file may be partial: the
// caller's record of it (an intent) says to delete it.
func (w *Writer) Close() (int64, error) {
	ok := false
	defer func() {
		if !ok {
			w.f.Close()
		}
	}()
	if err := w.closeParquet(); err != nil {
		return 0, err
	}
	if err := w.bw.Flush(); err != nil {
		return 0, err
	}
	if err := w.f.Sync(); err != nil {
		return 0, fmt.Errorf("fsync: %w", err)
	}
	st, err := w.f.Stat()
	if err != nil {
		return 0, err
	}
	ok = true
	if err := w.f.Close(); err != nil {
		return 0, err
	}
	return st.Size(), durable.SyncDir(filepath.Dir(w.path))
}

// Abort closes the file without finishing it; the caller deletes it.
func (w *Writer) Abort() {
	_ = w.closeParquet()
	_ = w.f.Close()
}

// closeParquet writes the footer into the buffer.
func (w *Writer) closeParquet() error {
	if w.cc != nil {
		return w.cc.close()
	}
	return w.fw.Close()
}

// ArrowBytes sums the buffer sizes of a record's columns.
func ArrowBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += dataBytes(c.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	return n
}

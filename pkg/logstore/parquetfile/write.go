package parquetfile

import (
	"bufio"
	"fmt"
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
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCompressionLevel(1),
		parquet.WithMaxRowGroupLength(rec.NumRows()+1),
		parquet.WithStats(true),
		parquet.WithDictionaryDefault(false),
	)
	fw, err := pqarrow.NewFileWriter(rec.Schema(), bw, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return 0, err
	}
	if err := fw.Write(rec); err != nil {
		fw.Close()
		return 0, err
	}
	if err := fw.Close(); err != nil {
		return 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("fsync: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	ok = true
	if err := f.Close(); err != nil {
		return 0, err
	}
	return st.Size(), durable.SyncDir(filepath.Dir(path))
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

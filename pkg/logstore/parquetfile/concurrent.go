package parquetfile

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// columnsWriter writes a Parquet file of flat columns as pqarrow's
// FileWriter does, but encodes and compresses a row group's columns on
// several goroutines. pqarrow writes them one after another, and
// encoding and zstd are most of a bulk load's time. Each row group is
// buffered (every column chunk in memory until the group closes, in
// column order, on the caller's goroutine), so the columns can be
// written in any order.
type columnsWriter struct {
	sc      *arrow.Schema
	fw      *file.Writer
	aprops  pqarrow.ArrowWriterProperties
	workers int
}

// allFlat reports whether every column of sc is a scalar that
// columnsWriter writes itself (its definition levels are its validity).
func allFlat(sc *arrow.Schema) bool {
	for _, f := range sc.Fields() {
		switch f.Type.ID() {
		case arrow.BOOL, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
			arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
			arrow.FLOAT32, arrow.FLOAT64,
			arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY:
		default:
			return false
		}
	}
	return true
}

// newColumnsWriter starts a file of schema sc (all flat) on w, with the
// schema conversion and key-value metadata pqarrow.NewFileWriter writes.
func newColumnsWriter(sc *arrow.Schema, w io.Writer, props *parquet.WriterProperties, aprops pqarrow.ArrowWriterProperties, workers int) (*columnsWriter, error) {
	pqs, err := pqarrow.ToParquet(sc, props, aprops)
	if err != nil {
		return nil, err
	}
	meta := make(metadata.KeyValueMetadata, 0)
	for i, k := range sc.Metadata().Keys() {
		meta.Append(k, sc.Metadata().Values()[i])
	}
	// The Arrow schema as pqarrow's WithStoreSchema stores it: an IPC
	// stream of the schema alone, base64. (pqarrow first renames list
	// elements; a flat schema has none.)
	var buf bytes.Buffer
	iw := ipc.NewWriter(&buf, ipc.WithSchema(sc), ipc.WithAllocator(props.Allocator()))
	if err := iw.Close(); err != nil {
		return nil, fmt.Errorf("store the Arrow schema: %w", err)
	}
	meta.Append("ARROW:schema", base64.StdEncoding.EncodeToString(buf.Bytes()))
	fw, err := file.NewParquetWriterWithError(w, pqs.Root(), file.WithWriterProps(props), file.WithWriteMetadata(meta))
	if err != nil {
		return nil, err
	}
	return &columnsWriter{sc: sc, fw: fw, aprops: aprops, workers: workers}, nil
}

// writeGroup writes rec as one row group, its columns shared out among
// the workers; it returns once they have all finished.
func (c *columnsWriter) writeGroup(rec arrow.RecordBatch) error {
	if !rec.Schema().Equal(c.sc) {
		return fmt.Errorf("a row group of schema %s in a file of schema %s", rec.Schema(), c.sc)
	}
	rgw, err := c.fw.AppendBufferedRowGroupChecked()
	if err != nil {
		return err
	}
	n := int(rec.NumCols())
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(c.workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := pqarrow.NewArrowWriteContext(context.Background(), &c.aprops)
			var levels []int16
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				errs[i] = c.writeColumn(ctx, rgw, i, rec.Column(i), &levels)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return rgw.Close()
}

// writeColumn writes column i, compressing its last page too, so that
// closing the row group only copies the chunks out.
func (c *columnsWriter) writeColumn(ctx context.Context, rgw file.BufferedRowGroupWriter, i int, arr arrow.Array, levels *[]int16) error {
	f := c.sc.Field(i)
	cw, err := rgw.Column(i)
	if err != nil {
		return err
	}
	// A flat column's definition levels: 1 for a value, 0 for a null;
	// none when it is required.
	var def []int16
	if f.Nullable {
		*levels = slices.Grow((*levels)[:0], arr.Len())[:arr.Len()]
		def = *levels
		for j := range def {
			def[j] = 1
			if arr.IsNull(j) {
				def[j] = 0
			}
		}
	}
	if err := pqarrow.WriteArrowToColumn(ctx, cw, arr, def, nil, f.Nullable); err != nil {
		return fmt.Errorf("column %s: %w", f.Name, err)
	}
	if fl, ok := cw.(interface{ FlushBufferedDataPages() error }); ok {
		if err := fl.FlushBufferedDataPages(); err != nil {
			return fmt.Errorf("column %s: %w", f.Name, err)
		}
	}
	return nil
}

// close writes the footer.
func (c *columnsWriter) close() error {
	return c.fw.Close()
}

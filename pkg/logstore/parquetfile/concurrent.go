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
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
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

// GroupBounds returns, for each column of rec, the row group written
// last, its smallest and largest non-null value as the Parquet writer
// recorded them in the group's statistics: a two-element array [min, max]
// of the column's type. It is nil for a column the writer kept no exact
// bounds for (an all-null column; a string or binary column holding a
// value longer than the statistics' size limit, whose bound Parquet drops
// or mangles), a
// float column whose bound is zero (Parquet writes -0 and +0 whatever the
// zero was), and for every column of a schema with a nested column (its
// Parquet columns are not its Arrow columns). Float bounds leave NaN out:
// a caller whose contract counts NaN checks for it itself.
func (w *Writer) GroupBounds(rec arrow.RecordBatch) ([]arrow.Array, error) {
	var md *metadata.FileMetaData
	var err error
	if w.cc != nil {
		md, err = w.cc.fw.FileMetadata()
	} else {
		md, err = w.fw.FileMetadata()
	}
	sc := w.sc
	if err != nil {
		return nil, err
	}
	out := make([]arrow.Array, sc.NumFields())
	if md.NumRowGroups() == 0 || !allFlat(sc) {
		return out, nil
	}
	rg := md.RowGroup(md.NumRowGroups() - 1)
	for i, f := range sc.Fields() {
		cc, err := rg.ColumnChunk(i)
		if err != nil {
			return nil, err
		}
		st, err := cc.Statistics()
		if err != nil {
			return nil, err
		}
		if st == nil || !st.HasMinMax() || longest(rec.Column(i)) > parquet.DefaultMaxStatsSize {
			continue
		}
		out[i] = boundsArray(f.Type, st)
	}
	return out, nil
}

// boundsArray makes [min, max] of type dt from st, nil when st's
// physical type is not dt's or its bounds are not exact values of dt.
func boundsArray(dt arrow.DataType, st metadata.TypedStatistics) arrow.Array {
	b := array.NewBuilder(memory.DefaultAllocator, dt)
	defer b.Release()
	switch s := st.(type) {
	case *metadata.Int64Statistics:
		bb, ok := b.(*array.Int64Builder)
		if !ok {
			return nil
		}
		bb.AppendValues([]int64{s.Min(), s.Max()}, nil)
	case *metadata.Int32Statistics:
		switch bb := b.(type) {
		case *array.Int32Builder:
			bb.AppendValues([]int32{s.Min(), s.Max()}, nil)
		default:
			return nil // int8/16 are stored as int32: not worth a case
		}
	case *metadata.Float64Statistics:
		bb, ok := b.(*array.Float64Builder)
		if !ok || s.Min() == 0 || s.Max() == 0 {
			return nil
		}
		bb.AppendValues([]float64{s.Min(), s.Max()}, nil)
	case *metadata.Float32Statistics:
		bb, ok := b.(*array.Float32Builder)
		if !ok || s.Min() == 0 || s.Max() == 0 {
			return nil
		}
		bb.AppendValues([]float32{s.Min(), s.Max()}, nil)
	case *metadata.BooleanStatistics:
		bb, ok := b.(*array.BooleanBuilder)
		if !ok {
			return nil
		}
		bb.AppendValues([]bool{s.Min(), s.Max()}, nil)
	case *metadata.ByteArrayStatistics:
		switch bb := b.(type) {
		case *array.StringBuilder:
			bb.Append(string(s.Min()))
			bb.Append(string(s.Max()))
		case *array.BinaryBuilder:
			bb.Append(s.Min())
			bb.Append(s.Max())
		default:
			return nil
		}
	case *metadata.FixedLenByteArrayStatistics:
		bb, ok := b.(*array.FixedSizeBinaryBuilder)
		if !ok {
			return nil
		}
		bb.Append(s.Min())
		bb.Append(s.Max())
	default:
		return nil
	}
	return b.NewArray()
}

// longest returns the length of a string or binary column's longest value
// (0 for other columns), from its offsets.
func longest(a arrow.Array) int64 {
	var n int64
	switch a := a.(type) {
	case *array.String:
		o := a.ValueOffsets()
		for i := 1; i < len(o); i++ {
			n = max(n, int64(o[i]-o[i-1]))
		}
	case *array.Binary:
		o := a.ValueOffsets()
		for i := 1; i < len(o); i++ {
			n = max(n, int64(o[i]-o[i-1]))
		}
	case *array.LargeString:
		o := a.ValueOffsets()
		for i := 1; i < len(o); i++ {
			n = max(n, o[i]-o[i-1])
		}
	case *array.LargeBinary:
		o := a.ValueOffsets()
		for i := 1; i < len(o); i++ {
			n = max(n, o[i]-o[i-1])
		}
	case *array.FixedSizeBinary:
		n = int64(a.DataType().(*arrow.FixedSizeBinaryType).ByteWidth)
	}
	return n
}

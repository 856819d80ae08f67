package history

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/streamcast/streamcast/pkg/logstore/parquetfile"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// The formats Export writes.
const (
	// FormatParquet is zstd Parquet with statistics, the Arrow schema
	// stored: what the published tables hold, across logs.
	FormatParquet = "parquet"
	// FormatArrow is the Arrow IPC file format.
	FormatArrow = "arrow"
	// FormatNDJSON is one JSON object per row: streamcast_offset,
	// streamcast_ts, then every column of the stream (null where a log
	// lacks it), canonically encoded.
	FormatNDJSON = "ndjson"
	// FormatFrames is one [offset,ts,row] line per row, byte-identical to
	// the data frame the server sends and `tail` prints (I4).
	FormatFrames = "frames"
)

// Formats lists the formats Export writes.
func Formats() []string { return []string{FormatParquet, FormatArrow, FormatNDJSON, FormatFrames} }

// DefaultRowsPerFile is how many rows each file of a directory export
// holds at most.
const DefaultRowsPerFile = 10_000_000

// ExportOptions say what Export writes where.
type ExportOptions struct {
	// Format is one of Formats.
	Format string
	// From and To bound the rows exactly, as ScanRequest's do.
	From, To int64
	// Out receives ndjson and frames when neither Path nor Dir is set.
	Out io.Writer
	// Path is the file to create (it must not exist).
	Path string
	// Dir, for large exports, is a directory to write part-00000.<format>,
	// part-00001.<format>, … into, RowsPerFile rows each at most.
	Dir         string
	RowsPerFile int64
	// Progress, when set, hears the rows written so far, now and then.
	Progress func(rows int64)
}

// ExportResult says what Export wrote.
type ExportResult struct {
	Rows  int64    // rows written
	Files []string // the files written (none when writing to Out)
}

// Export writes the cut's rows in [From, To) in one of Formats, in offset
// order. A file it created is removed again when the export fails, so a
// file that exists is a whole export.
func (r *Reader) Export(ctx context.Context, o ExportOptions) (res ExportResult, err error) {
	switch o.Format {
	case FormatParquet, FormatArrow, FormatNDJSON, FormatFrames:
	default:
		return res, fmt.Errorf("format %q: give one of parquet, arrow, ndjson or frames", o.Format)
	}
	if o.Path == "" && o.Dir == "" && (o.Format == FormatParquet || o.Format == FormatArrow) {
		return res, fmt.Errorf("format %s is written to a file: give an output file or directory", o.Format)
	}
	if o.RowsPerFile <= 0 {
		o.RowsPerFile = DefaultRowsPerFile
	}
	sc := r.schema
	w := &exporter{o: o, sc: sc, res: &res}
	defer func() {
		if cerr := w.closeFile(); cerr != nil && err == nil {
			err = cerr
		}
		if err != nil {
			for _, f := range res.Files {
				_ = os.Remove(f)
			}
			res.Files = nil
		}
	}()
	// Open the output now, so an export of no rows is an empty file.
	if _, err := w.room(); err != nil {
		return res, err
	}
	if o.Format == FormatFrames {
		var line []byte
		err = r.Rows(ctx, o.From, o.To, nil, func(offset, ts int64, row []byte) error {
			if err := w.next(1); err != nil {
				return err
			}
			line = wire.AppendFrame(line[:0], offset, ts, row)
			line = append(line, '\n')
			_, err := w.bw.Write(line)
			return err
		})
		return res, err
	}
	var enc *schema.Schema
	if o.Format == FormatNDJSON {
		if enc, err = schema.FromArrow(arrow.NewSchema(sc.Fields()[2:], nil)); err != nil {
			return res, fmt.Errorf("encode the stream's columns as JSON: %w", err)
		}
	}
	rr, err := r.Scan(ctx, ScanRequest{From: o.From, To: o.To})
	if err != nil {
		return res, err
	}
	defer rr.Release()
	var line []byte
	for rr.Next() {
		rec := rr.RecordBatch()
		for done := int64(0); done < rec.NumRows(); {
			room, err := w.room()
			if err != nil {
				return res, err
			}
			n := min(room, rec.NumRows()-done)
			part := rec.NewSlice(done, done+n)
			switch o.Format {
			case FormatNDJSON:
				offs := part.Column(0).(*array.Int64).Int64Values()
				ts := part.Column(1).(*array.Int64).Int64Values()
				cols := part.Columns()[2:]
				for i := range offs {
					line = ndjsonLine(line[:0], enc, offs[i], ts[i], cols, i)
					if _, err = w.bw.Write(line); err != nil {
						break
					}
				}
			case FormatParquet:
				err = w.pq.WriteGroup(part)
			case FormatArrow:
				err = w.ipc.Write(part)
			}
			part.Release()
			if err != nil {
				return res, fmt.Errorf("write the export: %w", err)
			}
			w.wrote(n)
			done += n
		}
	}
	return res, rr.Err()
}

// ndjsonLine appends one row as a JSON object and a newline:
// streamcast_offset, streamcast_ts, then the canonical encoding of the
// columns.
func ndjsonLine(dst []byte, enc *schema.Schema, offset, ts int64, cols []arrow.Array, i int) []byte {
	dst = append(dst, `{"streamcast_offset":`...)
	dst = strconv.AppendInt(dst, offset, 10)
	dst = append(dst, `,"streamcast_ts":`...)
	dst = strconv.AppendInt(dst, ts, 10)
	start := len(dst)
	dst = enc.AppendJSON(dst, cols, i)
	// The encoding is an object of its own: splice its members in.
	if len(dst)-start > 2 {
		dst[start] = ','
	} else {
		dst = dst[:start]
		dst = append(dst, '}')
	}
	return append(dst, '\n')
}

// exporter holds the file (or stream) an export is writing and rolls to
// the next file of a directory export when one is full.
type exporter struct {
	o      ExportOptions
	sc     *arrow.Schema
	res    *ExportResult
	inFile int64 // rows in the current file

	f   *os.File
	bw  *bufio.Writer
	pq  *parquetfile.Writer
	ipc *ipc.FileWriter
}

// room opens the output when needed and returns how many rows the
// current file takes before the next one.
func (w *exporter) room() (int64, error) {
	if w.bw == nil && w.pq == nil && w.ipc == nil {
		if err := w.openFile(); err != nil {
			return 0, err
		}
	}
	if w.o.Dir != "" && w.inFile >= w.o.RowsPerFile {
		if err := w.closeFile(); err != nil {
			return 0, err
		}
		if err := w.openFile(); err != nil {
			return 0, err
		}
	}
	if w.o.Dir == "" {
		return 1 << 62, nil
	}
	return w.o.RowsPerFile - w.inFile, nil
}

// next makes room for n rows and counts them.
func (w *exporter) next(n int64) error {
	if _, err := w.room(); err != nil {
		return err
	}
	w.wrote(n)
	return nil
}

func (w *exporter) wrote(n int64) {
	w.inFile += n
	w.res.Rows += n
	if w.o.Progress != nil && w.res.Rows%65536 < n {
		w.o.Progress(w.res.Rows)
	}
}

func (w *exporter) openFile() error {
	w.inFile = 0
	path := w.o.Path
	if w.o.Dir != "" {
		path = filepath.Join(w.o.Dir, fmt.Sprintf("part-%05d.%s", len(w.res.Files), w.o.Format))
	}
	if path == "" {
		w.bw = bufio.NewWriterSize(w.o.Out, 1<<20)
		return nil
	}
	if w.o.Format == FormatParquet {
		pq, err := parquetfile.Create(path, w.sc)
		if err != nil {
			return exists(path, err)
		}
		w.pq = pq
		w.res.Files = append(w.res.Files, path)
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return exists(path, err)
	}
	w.f = f
	w.res.Files = append(w.res.Files, path)
	w.bw = bufio.NewWriterSize(f, 1<<20)
	if w.o.Format == FormatArrow {
		w.ipc, err = ipc.NewFileWriter(w.bw, ipc.WithSchema(w.sc))
		if err != nil {
			return err
		}
	}
	return nil
}

func exists(path string, err error) error {
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists; an export never overwrites a file: remove it or give another name", path)
	}
	return err
}

// closeFile finishes the current file (or flushes the stream).
func (w *exporter) closeFile() error {
	var err error
	if w.pq != nil {
		_, err = w.pq.Close()
		w.pq = nil
	}
	if w.ipc != nil {
		err = errors.Join(err, w.ipc.Close())
		w.ipc = nil
	}
	if w.bw != nil {
		err = errors.Join(err, w.bw.Flush())
		w.bw = nil
	}
	if w.f != nil {
		err = errors.Join(err, w.f.Sync(), w.f.Close())
		w.f = nil
	}
	if err != nil {
		return fmt.Errorf("finish the export: %w", err)
	}
	return nil
}

package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamcast/streamcast/pkg/schema"
)

// Format is a source file's format.
type Format string

// The formats a load reads.
const (
	Parquet     Format = "parquet"
	ArrowFile   Format = "arrow"  // Arrow IPC file (random access, "ARROW1" magic)
	ArrowStream Format = "arrows" // Arrow IPC stream
	NDJSON      Format = "ndjson"
	CSV         Format = "csv"
)

// Formats lists the formats, for messages and flag help.
func Formats() []Format { return []Format{Parquet, ArrowFile, ArrowStream, NDJSON, CSV} }

// streaming reports whether a format can be read from a pipe (stdin).
func (f Format) streaming() bool { return f == ArrowStream || f == NDJSON || f == CSV }

// ParseFormat reads a --format value.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "parquet", "pq":
		return Parquet, nil
	case "arrow", "ipc", "feather":
		return ArrowFile, nil
	case "arrows", "arrow-stream", "ipc-stream":
		return ArrowStream, nil
	case "ndjson", "jsonl", "json":
		return NDJSON, nil
	case "csv":
		return CSV, nil
	}
	return "", fmt.Errorf("unknown format %q; the formats are parquet, arrow (IPC file), arrows (IPC stream), ndjson and csv", s)
}

// FormatOf returns the format a file's extension names; ok is false when
// the extension names none.
func FormatOf(path string) (f Format, ok bool) {
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".parquet", ".pq":
		return Parquet, true
	case ".arrow", ".feather", ".ipc":
		return ArrowFile, true
	case ".arrows":
		return ArrowStream, true
	case ".ndjson", ".jsonl", ".json":
		return NDJSON, true
	case ".csv":
		return CSV, true
	}
	return "", false
}

// Input is one file of a load; Path "-" is the Options' Stdin.
type Input struct {
	Path   string
	Format Format
}

// Options are the knobs of a Reader.
type Options struct {
	// Stdin is what an input "-" reads.
	Stdin io.Reader
	// SkipRows skips the first rows of the inputs taken together (the
	// rows an earlier run loaded). Skipped rows are not checked.
	SkipRows int64
	// BatchRows is the most rows a batch of NDJSON or CSV holds; 0 means
	// 65536. Parquet and Arrow batches follow the source's own.
	BatchRows int
}

// Location is a place in the source: a file and a row in it (1-based),
// and for NDJSON and CSV the line.
type Location struct {
	File string
	Row  int64
	Line int64 // 0 for Parquet and Arrow
}

// String words the location: file f, row r (line l).
func (l Location) String() string {
	s := fmt.Sprintf("%s, row %d", l.File, l.Row)
	if l.Line > 0 {
		s += ", line " + strconv.FormatInt(l.Line, 10)
	}
	return s
}

// RefusedError is a value or a column the schema refuses. Row is the
// refused row (0 when the refusal is about the file's columns, before
// any row); Column names the column (a dotted path inside a struct).
type RefusedError struct {
	Location
	Column  string
	Problem string
}

// Error words the refusal with its place.
func (e *RefusedError) Error() string {
	where := e.File
	if e.Row > 0 {
		where = e.Location.String()
	}
	if e.Column == "" {
		return where + ": " + e.Problem
	}
	return fmt.Sprintf("%s: column %q: %s", where, e.Column, e.Problem)
}

// batchReader reads one input.
type batchReader interface {
	// next returns the next batch of declared columns, checked, or io.EOF.
	// A refusal is a *RefusedError whose Row is relative to the file.
	next(ctx context.Context) (arrow.RecordBatch, error)
	// skip passes over up to n rows without checking them and returns
	// how many it passed (fewer at the end of the input).
	skip(n int64) (int64, error)
	// row returns the rows of the file read (or skipped) so far.
	row() int64
	// line returns the line of the next row (0 when lines mean nothing).
	line() int64
	close() error
}

// Reader reads a load's inputs in order, as one source. It implements
// logstore.IngestSource.
type Reader struct {
	sch    *schema.Schema
	inputs []Input
	o      Options

	idx       int
	cur       batchReader
	curFile   string
	delivered int64 // rows handed out or skipped, all inputs together
	skipLeft  int64
	size      int64 // total bytes of the inputs when all are files; -1 otherwise
	bytes     atomic.Int64
	where     Location
	starts    []fileStart // each input opened so far, and its first row's ordinal
}

// fileStart is where an input begins among the source's rows.
type fileStart struct {
	file  string
	first int64
}

// Locate returns the file and row (1-based) of the source's row ordinal
// pos (0-based, counting skipped rows), among the inputs opened so far:
// where a load that landed pos rows goes on.
func (r *Reader) Locate(pos int64) Location {
	var at Location
	for _, s := range r.starts {
		if s.first <= pos {
			at = Location{File: s.file, Row: pos - s.first + 1}
		}
	}
	return at
}

// Open checks the inputs (each exists, each has a format, stdin only for
// a streaming format, at most once) and returns their Reader. Files are
// opened one at a time as the load reaches them.
func Open(sch *schema.Schema, inputs []Input, o Options) (*Reader, error) {
	if len(inputs) == 0 {
		return nil, errors.New("no input given")
	}
	if o.BatchRows <= 0 {
		o.BatchRows = 1 << 16
	}
	r := &Reader{sch: sch, inputs: inputs, o: o, skipLeft: o.SkipRows, delivered: 0}
	stdin := 0
	for _, in := range inputs {
		if in.Format == "" {
			return nil, fmt.Errorf("%s: the format is not known from its extension; give --format (one of parquet, arrow, arrows, ndjson, csv)", in.Path)
		}
		if in.Path == "-" {
			stdin++
			if !in.Format.streaming() {
				return nil, fmt.Errorf("stdin (-) cannot be read as %s, which needs a seekable file; stdin takes arrows (Arrow IPC stream), ndjson or csv", in.Format)
			}
			if stdin > 1 {
				return nil, errors.New("stdin (-) is given twice; it can be read once")
			}
			continue
		}
		st, err := os.Stat(in.Path)
		if err != nil {
			return nil, err
		}
		if st.IsDir() {
			return nil, fmt.Errorf("%s is a directory; give the files in it", in.Path)
		}
		r.size += st.Size()
	}
	if stdin > 0 {
		r.size = -1
	}
	if sch.IsAny() {
		for _, in := range inputs {
			if in.Format != NDJSON {
				return nil, fmt.Errorf("%s: a stream without a schema loads NDJSON only (each line one JSON object), not %s", in.Path, in.Format)
			}
		}
	}
	return r, nil
}

// Size returns the inputs' total size in bytes, or -1 when one is stdin.
func (r *Reader) Size() int64 { return r.size }

// BytesRead returns the bytes read from the inputs so far (safe to call
// from another goroutine).
func (r *Reader) BytesRead() int64 { return r.bytes.Load() }

// Where returns where the reader is: the file and row of the next row to
// read, or after a refusal the refused row.
func (r *Reader) Where() Location { return r.where }

// Next returns the next checked batch of the declared columns, or io.EOF
// after the last input.
func (r *Reader) Next(ctx context.Context) (arrow.RecordBatch, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if r.cur == nil {
			if r.idx == len(r.inputs) {
				return nil, io.EOF
			}
			if err := r.openNext(); err != nil {
				return nil, err
			}
		}
		for r.skipLeft > 0 {
			n, err := r.cur.skip(r.skipLeft)
			if err != nil {
				return nil, r.fail(err)
			}
			r.skipLeft -= n
			r.delivered += n
			if n == 0 {
				break
			}
		}
		if r.skipLeft > 0 { // this input ended inside the skip
			if err := r.closeCur(); err != nil {
				return nil, err
			}
			continue
		}
		r.where = Location{File: r.curFile, Row: r.cur.row() + 1, Line: r.cur.line()}
		rec, err := r.cur.next(ctx)
		if errors.Is(err, io.EOF) {
			if err := r.closeCur(); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, r.fail(err)
		}
		r.delivered += rec.NumRows()
		return rec, nil
	}
}

// fail fills a refusal's file and records where the reader stopped.
func (r *Reader) fail(err error) error {
	var re *RefusedError
	if errors.As(err, &re) {
		re.File = r.curFile
		if re.Row > 0 {
			r.where = re.Location
		} else {
			r.where = Location{File: r.curFile}
		}
		return err
	}
	r.where = Location{File: r.curFile, Row: r.cur.row() + 1, Line: r.cur.line()}
	return fmt.Errorf("%s: %w", r.curFile, err)
}

func (r *Reader) openNext() error {
	in := r.inputs[r.idx]
	r.idx++
	name := in.Path
	var rs readSource
	if in.Path == "-" {
		name = "stdin"
		rs = readSource{r: countingReader{r: r.o.Stdin, n: &r.bytes}}
	} else {
		f, err := os.Open(in.Path)
		if err != nil {
			return err
		}
		rs = readSource{r: countingReader{r: f, n: &r.bytes}, f: &countingFile{f: f, n: &r.bytes}, c: f}
	}
	r.curFile = name
	r.starts = append(r.starts, fileStart{file: name, first: r.delivered})
	var (
		br  batchReader
		err error
	)
	switch in.Format {
	case Parquet:
		br, err = openParquet(r.sch, rs)
	case ArrowFile:
		br, err = openArrowFile(r.sch, rs)
	case ArrowStream:
		br, err = openArrowStream(r.sch, rs)
	case NDJSON:
		br, err = openNDJSON(r.sch, rs, r.o.BatchRows)
	case CSV:
		br, err = openCSV(r.sch, rs, r.o.BatchRows)
	default:
		err = fmt.Errorf("unknown format %q", in.Format)
	}
	if err != nil {
		if rs.c != nil {
			rs.c.Close()
		}
		var re *RefusedError
		if errors.As(err, &re) {
			re.File = name
			r.where = Location{File: name}
			return err
		}
		r.where = Location{File: name}
		return fmt.Errorf("%s: %w", name, err)
	}
	r.cur = br
	return nil
}

func (r *Reader) closeCur() error {
	if r.cur == nil {
		return nil
	}
	err := r.cur.close()
	r.cur = nil
	if err != nil {
		return fmt.Errorf("%s: %w", r.curFile, err)
	}
	return nil
}

// Close closes the input being read.
func (r *Reader) Close() error { return r.closeCur() }

// readSource is one opened input: a stream for every format, a random
// access file for the formats that need one (nil for stdin).
type readSource struct {
	r io.Reader
	f *countingFile
	c io.Closer
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// countingFile is a random access file that counts the bytes read.
type countingFile struct {
	f *os.File
	n *atomic.Int64
}

func (c *countingFile) Read(p []byte) (int, error) {
	n, err := c.f.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.f.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingFile) Seek(off int64, whence int) (int64, error) { return c.f.Seek(off, whence) }

// recovered turns a panic in a decoder fed outside bytes into an error.
func recovered(err *error) {
	if p := recover(); p != nil {
		if e, ok := p.(errTooLarge); ok {
			*err = e
			return
		}
		*err = fmt.Errorf("the file is damaged: decoding failed: %v", p)
	}
}

// maxBuffer bounds one buffer a reader allocates for a batch. A damaged
// file's lengths can ask for any size, and an allocation the machine
// cannot make kills the process instead of failing; past this bound the
// read fails with an error instead. A real batch needs far less: write
// smaller batches (row groups) otherwise.
const maxBuffer = 1 << 30

// boundedAllocator is the default allocator with maxBuffer enforced.
type boundedAllocator struct{ memory.Allocator }

// errTooLarge is the panic a refused allocation raises inside the
// decoder; recovered turns it into the read's error.
type errTooLarge int

func (e errTooLarge) Error() string {
	return fmt.Sprintf("a batch asks for a buffer of %d bytes, more than the %d a batch may use: the file is damaged, or its batches (row groups) are too large; write smaller ones", int(e), maxBuffer)
}

func (a boundedAllocator) Allocate(size int) []byte {
	if size > maxBuffer || size < 0 {
		panic(errTooLarge(size))
	}
	return a.Allocator.Allocate(size)
}

func (a boundedAllocator) Reallocate(size int, b []byte) []byte {
	if size > maxBuffer || size < 0 {
		panic(errTooLarge(size))
	}
	return a.Allocator.Reallocate(size, b)
}

// alloc is the allocator every reader uses.
var alloc memory.Allocator = boundedAllocator{memory.DefaultAllocator}
